"""yuebing's stand-in for Mooncake's Python package: ``mooncake.store`` on a
yuebing node (docs/python.md, "The mooncake drop-in").

A real Mooncake installs a package of the same name. Where its distribution
is present this one refuses to load, so that an engine never talks to
yuebing when its operator meant Mooncake, or the other way round; set
YUEBING_MOONCAKE_COMPAT=force to load it anyway."""

import importlib.metadata
import os

# Distributions that ship Mooncake's own `mooncake` package.
_REAL = ("mooncake-transfer-engine", "mooncake-transfer-engine-non-cuda", "mooncake")


def _real_mooncake() -> str | None:
    for name in _REAL:
        try:
            return f"{name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


if os.environ.get("YUEBING_MOONCAKE_COMPAT") != "force":
    _found = _real_mooncake()
    if _found:
        raise ImportError(
            f"both Mooncake ({_found}) and yuebing-mooncake-compat are installed; they share the package name "
            "`mooncake`. Uninstall one (pip uninstall yuebing-mooncake-compat), or set "
            "YUEBING_MOONCAKE_COMPAT=force to use yuebing's")

YUEBING = True  # how a caller tells this package from Mooncake's
