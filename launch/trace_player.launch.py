"""Publish a recorded predicate trace (JSONL) as PredicateArray messages.

    ros2 launch safemanip_ros trace_player.launch.py trace_file:=/path/trace.jsonl
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    params = os.path.join(get_package_share_directory('safemanip_ros'), 'config', 'params', 'trace_player.yaml')
    return LaunchDescription([
        DeclareLaunchArgument('trace_file', description='JSONL predicate trace to publish'),
        DeclareLaunchArgument('rate_hz', default_value='20.0', description='steps per second'),
        Node(
            package='safemanip_ros',
            executable='trace_player',
            name='trace_player',
            parameters=[params, {'trace_file': LaunchConfiguration('trace_file'),
                                 'rate_hz': LaunchConfiguration('rate_hz')}],
            output='screen',
        ),
    ])
