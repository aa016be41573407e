"""requirements.lock and pyproject.toml's dependencies, read with `packaging` (as pip reads
them), for the tests that hold the two together and the one that builds the image's wheels."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
EXTRAS = ("server", "test")  # the extras the lock is made for


def pins(path: Path = LOCK) -> dict[NormalizedName, Version]:
    """Each package the lock pins, by its normalized name. A pin is one ``name==version``
    line; comments, indented notes and anything else are refused rather than skipped, so a
    range or an option that slipped in cannot go unchecked."""
    found: dict[NormalizedName, Version] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==" and not req.marker and not req.extras, f"{path.name}:{number}: {line}"
        name = canonicalize_name(req.name)
        assert name not in found, f"{path.name}:{number}: {name} pinned twice"
        found[name] = Version(spec.version)
    return found


def declared() -> list[Requirement]:
    """pyproject.toml's dependencies: the base distribution's and those of the locked extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = [*project["dependencies"], *(r for extra in EXTRAS for r in project["optional-dependencies"][extra])]
    return [Requirement(line) for line in lines]


def applies(req: Requirement, extras: set[str]) -> bool:
    """Whether a requirement holds on this machine for a distribution installed with these
    extras (a marker may name a platform, a Python or an extra)."""
    return req.marker is None or any(req.marker.evaluate({"extra": extra}) for extra in {"", *extras})
