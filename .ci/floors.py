"""Print pyproject.toml's runtime dependencies at their declared lower bounds, as pip pins.

Used by `.ci/lowest` to install the oldest versions the package claims to support. torch is
left out (the job keeps the pinned CPU build, see requirements.txt); a dependency without a
lower bound is an error, since "the declared floors" would then mean nothing.
"""

import re
import sys
from pathlib import Path

import tomllib

SKIP = {"torch"}

project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
pins = []
for spec in project["dependencies"]:
    match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)\s*(?:,.*)?", spec)
    if not match:
        sys.exit(f"floors.py: dependency {spec!r} has no '>=' lower bound; give it one in pyproject.toml")
    name, floor = match.groups()
    if name.lower() not in SKIP:
        pins.append(f"{name}=={floor}")
print("\n".join(pins))
