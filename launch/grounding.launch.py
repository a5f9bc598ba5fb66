"""The grounding nodes for one robot/scene configuration.

    ros2 launch safemanip_ros grounding.launch.py robot_config:=/path/to/robot.yaml

``skills:=true`` also starts ``skill_grounding`` (the configuration's
``skills:`` section maps the stack's SkillEvent names to SafeManip actions).
``realtime_priority:=50`` runs the nodes under SCHED_FIFO at that priority
where permitted (0, the default: normal scheduling; safemanip_ros/realtime.py).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    default = os.path.join(get_package_share_directory('safemanip_ros'), 'config', 'robots', 'panda_demo.yaml')
    config = LaunchConfiguration('robot_config')
    realtime = {'SAFEMANIP_REALTIME_PRIORITY': LaunchConfiguration('realtime_priority')}
    return LaunchDescription([
        DeclareLaunchArgument('robot_config', default_value=default, description='config/robots/*.yaml'),
        DeclareLaunchArgument('realtime_priority', default_value='0',
                              description='SCHED_FIFO priority of the nodes (0: normal scheduling)'),
        Node(package='safemanip_ros', executable='joint_state_grounding', name='joint_state_grounding',
             parameters=[{'config': config}], output='screen',
             additional_env=realtime),
        Node(package='safemanip_ros', executable='contact_grounding', name='contact_grounding',
             parameters=[{'config': config, 'wrench_topic': ''}], output='screen',
             additional_env=realtime),
        Node(package='safemanip_ros', executable='tf_grounding', name='tf_grounding',
             parameters=[{'config': config, 'grasp_topic': 'predicates/contacts'}], output='screen',
             additional_env=realtime),
        Node(package='safemanip_ros', executable='camera_grounding', name='camera_grounding',
             parameters=[{'config': config}], output='screen',
             additional_env=realtime),
        DeclareLaunchArgument('skills', default_value='false',
                              description='start skill_grounding (needs a skills: section in robot_config)'),
        Node(package='safemanip_ros', executable='skill_grounding', name='skill_grounding',
             parameters=[{'config': config}], output='screen', condition=IfCondition(LaunchConfiguration('skills')),
             additional_env=realtime),
    ])
