"""The package's build backend (PEP 517, with PEP 660's editable hook),
standard library only.

pyproject.toml names it with ``backend-path``, so pip builds the package
from this file alone and fetches nothing: ``pip install ./python`` works
with no network and nothing installed but pip (docs/python.md says why this
and not setuptools). It builds one pure-Python wheel of the ``yuebing``
package and an sdist of the project, from the ``[project]`` table of
pyproject.toml; a key of that table it does not know is an error rather
than a silently wrong wheel.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import tarfile
import time
import zipfile
from pathlib import Path

try:
    import tomllib
except ImportError as e:  # Python < 3.11, which the package does not support either
    raise ImportError("yuebing needs Python 3.11 or later (tomllib)") from e

# The package a project ships unless its [tool.yuebing-build] table names
# another (python/mooncake-compat ships `mooncake`).
PACKAGE = "yuebing"
# The sdist carries what it takes to build the wheel again, and the tests
# where the project has them.
SDIST_PATHS = ("pyproject.toml", "README.md", "backend", "tests", "examples")
# Keys of [project] this backend turns into metadata.
KNOWN_KEYS = {"name", "version", "description", "readme", "requires-python", "license", "dependencies",
              "optional-dependencies"}
# Zip entries' time when SOURCE_DATE_EPOCH is unset: the earliest a zip can
# hold, so a wheel built twice from the same tree is the same bytes.
ZIP_EPOCH = 315532800  # 1980-01-01T00:00:00Z


def _root() -> Path:
    # PEP 517 runs every hook in the project's directory.
    return Path.cwd()


def _pyproject() -> dict:
    with open(_root() / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def _package() -> str:
    return _pyproject().get("tool", {}).get("yuebing-build", {}).get("package", PACKAGE)


def _project() -> dict:
    project = _pyproject()["project"]
    unknown = set(project) - KNOWN_KEYS
    if unknown:
        raise ValueError(f"pyproject.toml: [project] keys {sorted(unknown)} are not supported by backend/yuebing_build.py")
    return project


def _metadata(project: dict) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}"]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    if "license" in project:
        lines.append(f"License: {project['license']['text']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    for extra, deps in sorted(project.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    body = ""
    if "readme" in project:
        lines.append("Description-Content-Type: text/markdown")
        body = (_root() / project["readme"]).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n\n" + body


def _dist_name(project: dict) -> str:
    return f"{project['name'].replace('-', '_')}-{project['version']}"


def _files(top: Path):
    """The files under top, sorted, without bytecode."""
    for path in sorted(top.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            yield path


def _mtime() -> int:
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", ZIP_EPOCH)), ZIP_EPOCH)


class _Wheel:
    """A wheel being written: entries in order, RECORD last."""

    def __init__(self, path: Path):
        self._zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self._record: list[str] = []
        self._time = time.gmtime(_mtime())[:6]

    def add(self, name: str, data: bytes) -> None:
        info = zipfile.ZipInfo(name, self._time)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self._zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self._record.append(f"{name},sha256={digest},{len(data)}")

    def close(self, dist_info: str) -> None:
        record = f"{dist_info}/RECORD"
        self._record.append(f"{record},,")
        info = zipfile.ZipInfo(record, self._time)
        info.external_attr = 0o644 << 16
        self._zip.writestr(info, "\n".join(self._record) + "\n")
        self._zip.close()


def _build(wheel_directory: str, editable: bool) -> str:
    project = _project()
    dist = _dist_name(project)
    name = f"{dist}-py3-none-any.whl"
    dist_info = f"{dist}.dist-info"
    wheel = _Wheel(Path(wheel_directory) / name)
    if editable:
        # A .pth line puts the project's directory on sys.path, so the
        # installed package is the tree being edited.
        wheel.add(f"{_package()}.pth", (str(_root().resolve()) + "\n").encode())
    else:
        for path in _files(_root() / _package()):
            wheel.add(path.relative_to(_root()).as_posix(), path.read_bytes())
    wheel.add(f"{dist_info}/METADATA", _metadata(project).encode())
    wheel.add(f"{dist_info}/WHEEL",
              b"Wheel-Version: 1.0\nGenerator: yuebing_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    wheel.close(dist_info)
    return name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _build(wheel_directory, editable=False)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _build(wheel_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    dist = _dist_name(project)
    name = f"{dist}.tar.gz"
    mtime = _mtime()

    def add(tar: tarfile.TarFile, arcname: str, data: bytes) -> None:
        info = tarfile.TarInfo(f"{dist}/{arcname}")
        info.size, info.mtime, info.mode = len(data), mtime, 0o644
        tar.addfile(info, io.BytesIO(data))

    with open(Path(sdist_directory) / name, "wb") as out, gzip.GzipFile(fileobj=out, mode="wb", mtime=mtime) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        add(tar, "PKG-INFO", _metadata(project).encode())
        for top in SDIST_PATHS + (_package(),):
            path = _root() / top
            if not path.exists():
                continue
            for f in [path] if path.is_file() else _files(path):
                add(tar, f.relative_to(_root()).as_posix(), f.read_bytes())
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []
