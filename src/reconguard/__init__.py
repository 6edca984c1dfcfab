"""reconguard: how much of a private image can an attacker reconstruct from what you share?

Rooms (imports flow left to right): data, nn, metrics, stats → encoders → bounds, attacks,
defenses, train → experiments → report → cli. See README.md for the API.
"""

__version__ = "0.1.0"
