"""A real rclpy node, run as its own process by the round-trip tests: it
subscribes to <prefix>/in/<Type> for every message type named on the
command line and republishes each message unchanged on <prefix>/out/<Type>.
Prints READY once its subscriptions exist.  The prefix (``--prefix``,
default /roundtrip) keeps two tests running at once from echoing each
other's messages."""

import importlib
import sys

import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy


def main() -> None:
    rclpy.init()
    node = rclpy.create_node('roundtrip_echo')
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    keep = []
    args = sys.argv[1:]
    prefix = '/roundtrip'
    if args[:1] == ['--prefix']:
        prefix, args = args[1], args[2:]
    for spec in args:
        module, name = spec.rsplit('/', 1)
        cls = getattr(importlib.import_module(module.replace('/', '.')), name)
        pub = node.create_publisher(cls, f'{prefix}/out/{name}', qos)
        keep.append(node.create_subscription(cls, f'{prefix}/in/{name}', pub.publish, qos))
        keep.append(pub)
    print('READY', flush=True)
    try:
        rclpy.spin(node)
    except KeyboardInterrupt:
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
