"""The one build step pyproject.toml cannot declare: the wheel carries the repository's
top-level alembic/ and openapi/ folders inside the package, as jobq/migrations and
jobq/openapi (jobq.bundled finds them there, or in a checkout where they stand).
Everything else about the build is in pyproject.toml."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

# Top-level folder -> its place inside the installed package.
BUNDLED = {"alembic": "migrations", "openapi": "openapi"}
ROOT = Path(__file__).parent


def _files(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


class build_py_with_bundled(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the checkout's own folders
        for folder, inside in BUNDLED.items():
            for src in _files(folder):
                dest = Path(self.build_lib, "jobq", inside, src.relative_to(ROOT / folder))
                self.mkpath(str(dest.parent))
                self.copy_file(str(src), str(dest))

    def get_source_files(self) -> list[str]:
        # What an sdist must hold so that a wheel built from it has the folders too.
        return [*super().get_source_files(),
                *(str(p.relative_to(ROOT)) for folder in BUNDLED for p in _files(folder))]


setup(cmdclass={"build_py": build_py_with_bundled})
