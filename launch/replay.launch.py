"""Replay a recorded bag of raw inputs (joint states, TF, contacts, images)
into the live monitoring stack.

    ros2 launch safemanip_ros replay.launch.py bag:=/path/to/bag robot_config:=/path/robot.yaml

The recording's stamps are in the past: the stack always runs on the
player's ``/clock`` here (``use_sim_time`` true, ``bag_player`` with
``clock``), so its inputs are judged fresh by the time they were recorded at.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    share = get_package_share_directory('safemanip_ros')
    return LaunchDescription([
        DeclareLaunchArgument('bag', description='rosbag2 directory with the raw inputs'),
        DeclareLaunchArgument('rate', default_value='1.0'),
        DeclareLaunchArgument('robot_config', default_value=os.path.join(share, 'config', 'robots', 'panda_demo.yaml')),
        IncludeLaunchDescription(PythonLaunchDescriptionSource(os.path.join(share, 'launch', 'monitor.launch.py')),
                                 launch_arguments={'robot_config': LaunchConfiguration('robot_config'),
                                                   'use_sim_time': 'true'}.items()),
        Node(package='safemanip_ros', executable='bag_player', name='bag_player',
             parameters=[{'bag': LaunchConfiguration('bag'), 'rate': LaunchConfiguration('rate'),
                          'wait_for_subscribers': 1, 'clock': True}], output='screen'),
    ])
