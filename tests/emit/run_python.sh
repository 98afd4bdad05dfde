#!/bin/sh
# tests/emit/run_python.sh SCRIPT ARGS... - runs an emitted-module test with the Python that
# MAGPIE_EMIT_PYTHON names (default: Debian's /usr/bin/python3, whose python3-torch the default
# suite uses), e.g. MAGPIE_EMIT_PYTHON=/path/to/venv/bin/python ctest -L emit_torch.
# Exit 77 (ctest's skip) when that Python does not exist; the scripts skip without torch.
py=${MAGPIE_EMIT_PYTHON:-/usr/bin/python3}
if [ ! -x "$py" ]; then
    echo "SKIP: $py not found (MAGPIE_EMIT_PYTHON names the Python for the emitted-module tests)"
    exit 77
fi
exec "$py" "$@"
