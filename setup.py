"""Python packaging of safemanip_ros (pip and editable installs).

On a ROS 2 distro, colcon builds the package through CMakeLists.txt (it also
generates msg/ and srv/); pip installs only the Python package and its executables.
"""

import pathlib
import re

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent
VERSION = re.search(r"__version__ = '([^']+)'", (HERE / 'safemanip_ros' / '__init__.py').read_text()).group(1)
EXECUTABLES = [line.strip() for line in (HERE / 'resource' / 'executables.txt').read_text().splitlines()
               if line.strip() and not line.startswith('#')]

setup(
    name='safemanip_ros',
    version=VERSION,
    description='ROS 2 runtime safety monitor for robot manipulation (LTLf, DFAs, rosbag2 audits)',
    long_description=(HERE / 'README.md').read_text() if (HERE / 'README.md').exists() else '',
    long_description_content_type='text/markdown',
    license='Apache-2.0',
    python_requires='>=3.10',
    packages=find_packages(include=['safemanip_ros', 'safemanip_ros.*']),
    package_data={'safemanip_ros': ['py.typed']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/safemanip_ros']),
        ('share/safemanip_ros', ['package.xml']),
    ],
    install_requires=[
        'numpy>=1.24',
        'scipy>=1.10',
        'pyyaml>=6.0',
        'rosbags>=0.11.6,<0.12',   # the range safemanip_ros.bag.compat is tested at both ends of
        # rosbags reads metadata.yaml with ruamel.yaml; its C parser makes that 10x faster (audit of many bags).
        "ruamel.yaml.clib>=0.2.8; platform_python_implementation == 'CPython'",
        'opencv-python-headless>=4.8',
        'matplotlib>=3.7',
        'tqdm>=4.60',
    ],
    extras_require={
        'test': ['pytest>=7', 'hypothesis>=6'],
        'reference': ['ltlf2dfa==2.0.0'],
        'sim': ['mujoco==3.3.7', 'numba>=0.59', 'Pillow', 'termcolor'],   # + robosuite==1.5.2 with --no-deps
        'ray': ['ray[default]>=2.9'],
        'gym': ['gymnasium>=1.0,<2'],      # safemanip_ros.gym: the wrappers and LetterWorld
        'foxglove': ['foxglove-sdk>=0.30,<0.31'],    # safemanip run --foxglove
    },
    entry_points={'console_scripts': EXECUTABLES},
    zip_safe=True,
)
