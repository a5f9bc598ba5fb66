"""The monitoring stack beside a robot: grounding nodes, the monitor and the
supervisor (both lifecycle nodes, started with autostart).

    ros2 launch safemanip_ros monitor.launch.py robot_config:=/path/robot.yaml \
        controller_topic:=/arm_controller/joint_trajectory
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode


def generate_launch_description():
    share = get_package_share_directory('safemanip_ros')
    robot = LaunchConfiguration('robot_config')
    properties = LaunchConfiguration('properties')
    policy = os.path.join(get_package_share_directory('safemanip_ros'), 'config', 'params', 'supervisor_policy.yaml')
    return LaunchDescription([
        DeclareLaunchArgument('robot_config', default_value=os.path.join(share, 'config', 'robots', 'panda_demo.yaml')),
        DeclareLaunchArgument('properties', default_value=os.path.join(share, 'config', 'properties', 'safemanip.yaml')),
        DeclareLaunchArgument('physical_properties',
                              default_value=os.path.join(share, 'config', 'properties', 'physical.yaml')),
        DeclareLaunchArgument('controller_topic', default_value='joint_trajectory_controller/joint_trajectory'),
        IncludeLaunchDescription(PythonLaunchDescriptionSource(os.path.join(share, 'launch', 'grounding.launch.py')),
                                 launch_arguments={'robot_config': robot}.items()),
        LifecycleNode(package='safemanip_ros', executable='monitor', name='monitor', namespace='',
                      parameters=[{'properties': [properties, LaunchConfiguration('physical_properties')], 'robot_config': robot, 'rate_hz': 20.0,
                                   'autostart': True}], output='screen'),
        LifecycleNode(package='safemanip_ros', executable='supervisor', name='supervisor', namespace='',
                      parameters=[{'policy_file': policy,
                                           'controller_topic': LaunchConfiguration('controller_topic'),
                                           'autostart': True}], output='screen'),
    ])
