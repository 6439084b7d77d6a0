"""Where attn finds its native pieces: the runtime library (libattn_runtime.so, which
registers torch.ops.attn.*) and the tools (attn-compile, attn-opt).

scripts/setup.sh installs this package into the project's virtual environment and links
both into it (`<env>/lib/attn/libattn_runtime.so`, `<env>/bin/attn-compile`), so in that
environment nothing needs to be configured. In order, each is looked for at:
  1. $ATTN_RUNTIME_LIB / $ATTN_COMPILE / $ATTN_OPT (the file itself);
  2. $ATTN_BUILD_DIR/runtime/ / $ATTN_BUILD_DIR/bin/ (a build directory);
  3. the running Python environment (sys.prefix), where setup.sh links them;
  4. <repo>/build/ of the source checkout this package is in;
  5. (the tools only) PATH.
"""

import os
import shutil
import sys

__all__ = ["runtime_library_path", "compiler_path", "opt_path"]

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _candidates(variable, build_relative, environment_relative):
    explicit = os.environ.get(variable)
    if explicit:
        return [os.path.abspath(explicit)]
    found = []
    build = os.environ.get("ATTN_BUILD_DIR")
    if build:
        found.append(os.path.join(os.path.abspath(build), build_relative))
    found.append(os.path.join(sys.prefix, environment_relative))
    found.append(os.path.join(_REPO, "build", build_relative))
    return found


def _first_existing(candidates):
    return next((c for c in candidates if os.path.exists(c)), None)


def runtime_library_path():
    """The libattn_runtime.so attn loads (see the module docstring for the order).
    Raises RuntimeError naming every place looked at when none exists."""
    candidates = _candidates("ATTN_RUNTIME_LIB", os.path.join("runtime", "libattn_runtime.so"),
                             os.path.join("lib", "attn", "libattn_runtime.so"))
    found = _first_existing(candidates)
    if found is None:
        raise RuntimeError(
            f"attn: runtime library libattn_runtime.so not found (looked at {', '.join(candidates)}); "
            "run scripts/setup.sh, or set ATTN_RUNTIME_LIB to the library")
    return found


def _tool_path(tool, variable):
    candidates = _candidates(variable, os.path.join("bin", tool), os.path.join("bin", tool))
    found = _first_existing(candidates) or (None if os.environ.get(variable) else shutil.which(tool))
    if found is None:
        raise RuntimeError(
            f"attn: {tool} not found (looked at {', '.join(candidates)} and PATH); "
            f"run scripts/setup.sh, or set {variable} to the binary")
    return found


def compiler_path():
    """The attn-compile binary attn.compile runs (see the module docstring for the
    order). Raises RuntimeError naming every place looked at when none exists."""
    return _tool_path("attn-compile", "ATTN_COMPILE")


def opt_path():
    """The attn-opt binary attn.opt runs (found like attn-compile, $ATTN_OPT first)."""
    return _tool_path("attn-opt", "ATTN_OPT")
