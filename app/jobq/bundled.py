"""Files kept at the top of the repository that jobq reads at run time: the migrations
(``alembic/``) and the OpenAPI document with its guide (``openapi/``).

In a checkout, and so in an editable install, they are read where they stand. A wheel
carries copies inside the package, as ``jobq/migrations`` and ``jobq/openapi``: setup.py's
build step puts them there. Neither place is a link, so a checkout on any system sees the
same files.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# app/jobq/bundled.py -> the repository's root, when this is a checkout.
_CHECKOUT = _PACKAGE.parent.parent


def _folder(in_wheel: str, in_checkout: str, marker: str) -> Path:
    for folder in (_PACKAGE / in_wheel, _CHECKOUT / in_checkout):
        if (folder / marker).is_file():
            return folder
    raise RuntimeError(
        f"jobq's {in_checkout}/ files are missing: looked for {marker} in "
        f"{_PACKAGE / in_wheel} (an installed wheel) and {_CHECKOUT / in_checkout} (a checkout)"
    )


def migrations() -> Path:
    """The Alembic script folder: env.py, script.py.mako and versions/."""
    return _folder("migrations", "alembic", "env.py")


def openapi() -> Path:
    """The folder of openapi.json and GUIDE.md."""
    return _folder("openapi", "openapi", "openapi.json")
