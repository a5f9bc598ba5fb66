"""Repair the ROS 2 PyPI wheels' CMake exports so rosidl builds against them.

The wheels' ``share/*/cmake/export_*__rosidl_generator_pyExport.cmake`` files
hard-code the wheel build machine's Python and numpy include directories
(``/opt/python/cp3XX-cp3XX/include/python3.XX`` and
``.../site-packages/numpy/_core/include``).  This rewrites them to the running
interpreter's include directory and ``numpy.get_include()``.  Idempotent:
prints how many files it changed.

Usage: python tools/fix_ros_wheels.py PREFIX
"""

from __future__ import annotations

import pathlib
import re
import sys
import sysconfig


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    import numpy

    prefix = pathlib.Path(argv[1])
    py_include = sysconfig.get_paths()['include']
    np_include = numpy.get_include()
    bad_np = re.compile(r'/opt/python/cp3\d+-cp3\d+/lib/python3\.\d+/site-packages/numpy/(?:_?core)/include')
    bad_py = re.compile(r'/opt/python/cp3\d+-cp3\d+/include/python3\.\d+')
    changed = 0
    for path in sorted(prefix.glob('share/*/cmake/*.cmake')):
        text = path.read_text()
        if '/opt/python/' not in text:
            continue
        new = bad_py.sub(py_include, bad_np.sub(np_include, text))
        if new != text:
            path.write_text(new)
            changed += 1
    print(f'fix_ros_wheels: rewrote include paths in {changed} CMake file(s) under {prefix}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
