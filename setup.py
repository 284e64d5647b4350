"""Build hook: compile exchanges/hashing/hashcore.py with mypyc when possible; metadata is in pyproject.toml.

`build_ext` writes a copy of hashcore.py as exchanges/hashing/_hashcore_native.py with
`SOURCE_DIGEST = "<sha256 of hashcore.py>"` appended, has mypyc turn it into C, removes the copy
and compiles the extension. `exchanges.hashing.native` imports the result only while hashcore.py still
has that digest. Without mypy/mypyc or a C compiler, with HASHBROKER_PURE set, or when anything in
that fails, the install goes on and hashcore.py runs interpreted (same answers, slower).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
SOURCE = Path("exchanges") / "hashing" / "hashcore.py"
GENERATED = Path("exchanges") / "hashing" / "_hashcore_native.py"
NATIVE_NAME = "exchanges.hashing._hashcore_native"
PLACEHOLDER = Extension(NATIVE_NAME, sources=[])
"""Makes setuptools plan a build_ext (and a platform wheel); replaced by mypyc's real extension."""


def say(message: str) -> None:
    print(f"hashbroker build: {message}", file=sys.stderr, flush=True)


def pure_requested() -> bool:
    return os.environ.get("HASHBROKER_PURE", "") not in ("", "0")


def mypyc_extensions() -> list[Any]:
    """mypyc's Extension for the digest-stamped copy of hashcore.py, or [] with the reason said."""
    try:
        from mypyc.build import mypycify
    except ImportError as exc:
        say(f"mypyc is not importable ({exc}); hashing stays pure Python")
        return []
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    GENERATED.write_bytes(
        source + f'\n\nSOURCE_DIGEST: Final = "{digest}"\n"""sha256 of the hashcore.py built."""\n'.encode()
    )
    try:
        return list(mypycify([str(GENERATED)], opt_level="3"))
    except (Exception, SystemExit) as exc:  # mypyc exits on a type error
        say(f"mypyc could not translate {SOURCE} ({exc!r}); hashing stays pure Python")
        return []
    finally:
        GENERATED.unlink(missing_ok=True)


METADATA_ONLY = {"egg_info", "dist_info", "sdist"}
"""Commands that finalize build_ext only to list files: no reason to run mypyc for them."""


class OptionalMypycBuildExt(build_ext):
    """Swaps the placeholder for mypyc's extension when a build really runs, removes compiled
    leftovers when it does not compile, and lets no failure of compiling fail the install."""

    extensions: list[Any]
    native_ready = False

    def finalize_options(self) -> None:
        building = not set(self.distribution.commands) <= METADATA_ONLY
        if self.distribution.ext_modules == [PLACEHOLDER] and building and not pure_requested():
            old_cwd = os.getcwd()
            os.chdir(ROOT)  # mypyc names the module after its path relative to here
            try:
                extensions = mypyc_extensions()
            finally:
                os.chdir(old_cwd)
            if extensions:
                self.distribution.ext_modules = extensions
                self.native_ready = True
        super().finalize_options()

    def run(self) -> None:
        if not self.native_ready:
            if pure_requested():
                say("HASHBROKER_PURE is set; hashing stays pure Python")
            self.extensions = []
            self.remove_earlier_builds()
            return
        old_cwd = os.getcwd()
        os.chdir(ROOT)  # mypyc's C sources are named relative to here
        try:
            super().run()
        except (Exception, SystemExit) as exc:
            say(f"compiling the hash module failed ({exc!r}); hashing stays pure Python")
            self.extensions = []
            self.remove_earlier_builds()
            return
        finally:
            os.chdir(old_cwd)
        say(f"compiled {NATIVE_NAME} from {SOURCE} (its sha256 stamped in)")

    def remove_earlier_builds(self) -> None:
        """A pure install must not ship or keep a compiled module from an earlier build (build/lib
        and, for editable installs, the source tree keep them)."""
        package = NATIVE_NAME.rpartition(".")[0].replace(".", os.sep)
        in_place = self.inplace or getattr(self, "editable_mode", False)
        folders = [ROOT / self.build_lib / package] + ([ROOT / package] if in_place else [])
        for folder in folders:
            for leftover in folder.glob(NATIVE_NAME.rpartition(".")[2] + "*"):
                if leftover.suffix in (".so", ".pyd"):
                    say(f"removing {leftover} from an earlier build")
                    leftover.unlink()


setup(
    ext_modules=[PLACEHOLDER],
    cmdclass={"build_ext": OptionalMypycBuildExt},
)
