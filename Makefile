# The two commands a new user runs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test install bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e ".[test]"
	# torchattacks' AutoAttack (APGD-CE, APGD-T, FAB-T, Square): --no-deps, its requirements would pull torchvision
	$(PY) -m pip install --quiet --no-deps "torchattacks>=3.5"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/reconguard demo

test: $(STAMP)
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/fisher.py
	$(PY) benchmarks/instahide.py
	$(PY) benchmarks/atat.py
	$(PY) benchmarks/inversion.py
	$(PY) benchmarks/carlini.py

clean:
	rm -rf $(VENV) runs .pytest_cache
