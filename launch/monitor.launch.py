"""The monitoring stack beside a robot: grounding nodes, the monitor and the
supervisor (both lifecycle nodes, started with autostart).

    ros2 launch safemanip_ros monitor.launch.py robot_config:=/path/robot.yaml \
        controller_topic:=/arm_controller/joint_trajectory

``realtime_priority:=50`` runs every node (grounding, monitor, supervisor)
under SCHED_FIFO at that priority with memory locked, where permitted (0, the
default: normal scheduling; safemanip_ros/realtime.py).  A supervisor that
dies is started again after 1 s (it holds again for violations still open).
``use_sim_time:=true`` puts every node on ``/clock`` (a simulator, or a
replayed recording: launch/replay.launch.py sets it).  ``foxglove:=8765``
(``[HOST:]PORT``; 127.0.0.1 unless a host is named) also starts a Foxglove
WebSocket server beside the stack, read-only unless
``operator_credential_file:=FILE`` names the operator credential (docs/nodes.md).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PythonExpression
from launch_ros.actions import LifecycleNode, Node, SetParameter

GROUNDING_OUTPUTS = [f'predicates/{source}:safemanip_ros/msg/PredicateArray:0.5'
                     for source in ('joint_states', 'contacts', 'tf', 'camera')]


def generate_launch_description():
    share = get_package_share_directory('safemanip_ros')
    robot = LaunchConfiguration('robot_config')
    properties = LaunchConfiguration('properties')
    policy = os.path.join(get_package_share_directory('safemanip_ros'), 'config', 'params', 'supervisor_policy.yaml')
    realtime = {'SAFEMANIP_REALTIME_PRIORITY': LaunchConfiguration('realtime_priority')}
    return LaunchDescription([
        DeclareLaunchArgument('use_sim_time', default_value='false',
                              description='true: every node on /clock (a simulator or a replayed recording)'),
        SetParameter(name='use_sim_time', value=LaunchConfiguration('use_sim_time')),
        DeclareLaunchArgument('realtime_priority', default_value='0',
                              description='SCHED_FIFO priority of every node (0: normal scheduling)'),
        DeclareLaunchArgument('robot_config', default_value=os.path.join(share, 'config', 'robots', 'panda_demo.yaml')),
        DeclareLaunchArgument('properties', default_value=os.path.join(share, 'config', 'properties', 'safemanip.yaml')),
        DeclareLaunchArgument('physical_properties',
                              default_value=os.path.join(share, 'config', 'properties', 'physical.yaml')),
        DeclareLaunchArgument('controller_topic', default_value='joint_trajectory_controller/joint_trajectory'),
        DeclareLaunchArgument('trajectory_action', default_value="''",
                              description='a hold also cancels every goal of this action server '
                                          '(e.g. /joint_trajectory_controller/follow_joint_trajectory)'),
        DeclareLaunchArgument('servo_pause_service', default_value="''",
                              description="a hold also pauses MoveIt Servo (std_srvs/SetBool, e.g. "
                                          "/servo_node/pause_servo)"),
        DeclareLaunchArgument('skills', default_value='false',
                              description='ground action onsets from SkillEvent messages (robot_config skills:)'),
        DeclareLaunchArgument('switch_controller_service', default_value="''",
                              description='a hold also switches ros2_control controllers through this '
                                          'controller_manager_msgs/SwitchController service '
                                          '(e.g. /controller_manager/switch_controller)'),
        DeclareLaunchArgument('hold_controller', default_value="''",
                              description='the controller a hold switches to (with switch_controller_service)'),
        DeclareLaunchArgument('motion_controllers', default_value="['']",
                              description='the controllers it replaces, a list (with switch_controller_service)'),
        DeclareLaunchArgument('foxglove', default_value="''",
                              description='[HOST:]PORT of a Foxglove WebSocket server beside the stack (empty: none)'),
        DeclareLaunchArgument('operator_credential_file', default_value="''",
                              description='the operator credential a Foxglove connection presents to act (empty: '
                                          'read-only)'),
        Node(package='safemanip_ros', executable='foxglove', name='foxglove', namespace='',
             parameters=[{'address': LaunchConfiguration('foxglove'), 'config': robot,
                          'operator_credential_file': LaunchConfiguration('operator_credential_file')}],
             output='screen', condition=IfCondition(PythonExpression(["'", LaunchConfiguration('foxglove'), "' != ''"]))),
        IncludeLaunchDescription(PythonLaunchDescriptionSource(os.path.join(share, 'launch', 'grounding.launch.py')),
                                 launch_arguments={'robot_config': robot, 'skills': LaunchConfiguration('skills'),
                                                   'realtime_priority': LaunchConfiguration('realtime_priority')}.items()),
        LifecycleNode(package='safemanip_ros', executable='monitor', name='monitor', namespace='',
                      parameters=[{'properties': [properties, LaunchConfiguration('physical_properties')], 'robot_config': robot, 'rate_hz': 20.0,
                                   'autostart': True}], output='screen', additional_env=realtime),
        LifecycleNode(package='safemanip_ros', executable='supervisor', name='supervisor', namespace='',
                      parameters=[{'policy_file': policy,
                                           # The monitor's suites: a policy naming what they lack fails configure.
                                           'properties': [properties, LaunchConfiguration('physical_properties')],
                                           'controller_topic': LaunchConfiguration('controller_topic'),
                                           'trajectory_action': LaunchConfiguration('trajectory_action'),
                                           'servo_pause_service': LaunchConfiguration('servo_pause_service'),
                                           'switch_controller_service':
                                               LaunchConfiguration('switch_controller_service'),
                                           'hold_controller': LaunchConfiguration('hold_controller'),
                                           'motion_controllers': LaunchConfiguration('motion_controllers'),
                                           # A grounding process that dies silences its predicates: a fail-safe
                                           # hold, as for a silent sensor (a live one publishes unknowns instead).
                                           'failsafe_topics': GROUNDING_OUTPUTS,
                                           'autostart': True}], output='screen', additional_env=realtime,
                      # Nothing else holds the arm: a supervisor that dies is started again, and asks the
                      # monitor for the violations still open (monitor/open_violations).
                      respawn=True, respawn_delay=1.0),
    ])
