"""Build hook: compile the hot pure modules in `NATIVE_MODULES` with mypyc when possible; metadata is
in pyproject.toml.

For each module `build_ext` writes a copy, e.g. hashcore.py as exchanges/hashing/_hashcore_native.py,
with `SOURCE_DIGEST = "<sha256 of the source>"` appended, has mypyc turn it into C, removes the copy
and compiles the extension. `exchanges.native_twin.choose` (used by `exchanges.hashing.native` and
`broker.protocol.native`) imports a result only while its source still has that digest. Without
mypy/mypyc or a C compiler, with HASHBROKER_PURE set, or when anything in that fails, the install
goes on and the modules run interpreted (same answers, slower).
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
NATIVE_MODULES = {
    "exchanges.hashing._hashcore_native": Path("exchanges") / "hashing" / "hashcore.py",
    "broker.protocol._publish_scan_native": Path("broker") / "protocol" / "publish_scan.py",
}
"""Compiled twin's module name -> the pure module it is compiled from (relative to ROOT)."""
PLACEHOLDER = Extension("exchanges.hashing._hashcore_native", sources=[])
"""Makes setuptools plan a build_ext (and a platform wheel); replaced by mypyc's real extensions."""


def say(message: str) -> None:
    print(f"hashbroker build: {message}", file=sys.stderr, flush=True)


def pure_requested() -> bool:
    return os.environ.get("HASHBROKER_PURE", "") not in ("", "0")


def generated_path(native_name: str) -> Path:
    return Path(*native_name.split(".")).with_suffix(".py")


def mypyc_extensions() -> list[Any]:
    """mypyc's Extensions for the digest-stamped copies of `NATIVE_MODULES`, each module that
    mypyc cannot translate left out with the reason said ([] without mypyc)."""
    try:
        from mypyc.build import mypycify
    except ImportError as exc:
        say(f"mypyc is not importable ({exc}); every module stays pure Python")
        return []
    extensions: list[Any] = []
    for native_name, source_path in NATIVE_MODULES.items():
        generated = generated_path(native_name)
        source = source_path.read_bytes()
        digest = hashlib.sha256(source).hexdigest()
        stamp = f'\n\nSOURCE_DIGEST: Final = "{digest}"\n"""sha256 of the {source_path.name} built."""\n'
        generated.write_bytes(source + stamp.encode())
        try:
            extensions += mypycify([str(generated)], opt_level="3")
        except (Exception, SystemExit) as exc:  # mypyc exits on a type error
            say(f"mypyc could not translate {source_path} ({exc!r}); it stays pure Python")
        finally:
            generated.unlink(missing_ok=True)
    return extensions


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
                say("HASHBROKER_PURE is set; every module stays pure Python")
            self.extensions = []
            self.remove_earlier_builds()
            return
        old_cwd = os.getcwd()
        os.chdir(ROOT)  # mypyc's C sources are named relative to here
        try:
            super().run()
        except (Exception, SystemExit) as exc:
            say(f"compiling the native modules failed ({exc!r}); every module stays pure Python")
            self.extensions = []
            self.remove_earlier_builds()
            return
        finally:
            os.chdir(old_cwd)
        names = [getattr(e, "name", "?") for e in self.extensions]
        say(f"compiled {', '.join(names)} (each with its source's sha256 stamped in)")

    def remove_earlier_builds(self) -> None:
        """A pure install must not ship or keep a compiled module from an earlier build (build/lib
        and, for editable installs, the source tree keep them)."""
        in_place = self.inplace or getattr(self, "editable_mode", False)
        for native_name in NATIVE_MODULES:
            package, _, module = native_name.rpartition(".")
            package_dir = package.replace(".", os.sep)
            folders = [ROOT / self.build_lib / package_dir] + ([ROOT / package_dir] if in_place else [])
            for folder in folders:
                for leftover in folder.glob(module + "*"):
                    if leftover.suffix in (".so", ".pyd"):
                        say(f"removing {leftover} from an earlier build")
                        leftover.unlink()


setup(
    ext_modules=[PLACEHOLDER],
    cmdclass={"build_ext": OptionalMypycBuildExt},
)
