"""keep_freed_memory: glibc takes the settings, and memory freed by a large array stays in the process."""

import platform
import subprocess
import sys
import textwrap

import pytest


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_large_blocks_come_from_the_heap_and_stay(subprocess_env, tmp_path):
    # In a child: the setting is process-wide. A freed 64 MB block stays mapped: the process's
    # resident memory does not fall back when the array goes, which it does by default.
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import polydom

        def resident_mb():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * 4096 / 2**20

        if sys.argv[1] == "keep":
            assert polydom.keep_freed_memory() is True
        before = resident_mb()
        a = np.ones(8 * 2**20)  # 64 MB, touched
        del a
        print(round(resident_mb() - before))
    """)
    kept = subprocess.run([sys.executable, "-P", "-c", code, "keep"], env=subprocess_env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    default = subprocess.run([sys.executable, "-P", "-c", code, "default"], env=subprocess_env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
    assert kept.returncode == 0 and default.returncode == 0, kept.stderr + default.stderr
    assert int(kept.stdout) >= 60 and int(default.stdout) <= 4, (kept.stdout, default.stdout)
