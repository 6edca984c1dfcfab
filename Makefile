# The two commands a new user runs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test install data bench clean
FASHION := /usr/share/datasets/fashion-mnist

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e ".[test]"
	# torchattacks' AutoAttack (APGD-CE, APGD-T, FAB-T, Square): --no-deps, its requirements would pull torchvision
	$(PY) -m pip install --quiet --no-deps "torchattacks>=3.5"
	touch $(STAMP)

install: $(STAMP)

# Fashion-MNIST (the recipes' `fashion` presets, `--data fashion-mnist`): Debian's dataset-fashion-mnist, installed
# where apt is available and we are root (as on these machines and in CI); elsewhere the line says what to do.
data:
	@if [ -f $(FASHION)/train-images-idx3-ubyte.gz ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 || \
	   (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1)) || \
	  echo "note: could not install dataset-fashion-mnist; its tests skip (see the README: Data)"; \
	else echo "note: Fashion-MNIST is not installed: sudo apt-get install dataset-fashion-mnist, or pass --root FOLDER" \
	  "with its four IDX files (see the README: Data)"; fi

demo: $(STAMP)
	$(VENV)/bin/reconguard demo
	@echo "run more: $(VENV)/bin/reconguard --help   (or activate the environment first: . $(VENV)/bin/activate)"

# The suite on two workers, one thread each, whole files per worker (module fixtures built once): 407 s vs 609 s
# in one process on 2 cores.
test: $(STAMP) data
	$(PY) -m ruff check src tests benchmarks
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --dist loadfile

bench: $(STAMP)
	$(PY) benchmarks/fisher.py
	$(PY) benchmarks/instahide.py
	$(PY) benchmarks/atat.py
	$(PY) benchmarks/inversion.py
	$(PY) benchmarks/carlini.py
	$(PY) benchmarks/demo.py

clean:
	rm -rf $(VENV) runs .pytest_cache
