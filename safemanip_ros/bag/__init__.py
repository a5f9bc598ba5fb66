"""Recorded rollouts on disk: rosbag2 reading and writing, for every layer.

* :func:`open_bag` (:mod:`.reader`): the one way to open a bag, repair of an
  interrupted recording and unreadable splits included; :mod:`.bulk` reads
  its messages in bulk, :mod:`.layouts` and :mod:`.columns` decode them to
  numpy columns without building message objects.
* :class:`SplitBagWriter` (:mod:`.writer`): crash-safe writing in short
  splits; :mod:`.repair` lists again the splits an interruption left out;
  :class:`ThreadedRecorder` (:mod:`.recorder`) writes off the control path.
* :func:`typestore` (:mod:`.typestore`): ROS 2 Kilted's types and ours.
* :mod:`.compat`: all that this package knows of rosbags beyond its public API.

Every error raised here is a :class:`BagError` naming the bag and the problem;
only this package imports rosbags.
No rclpy, and nothing of grounding, monitor or audit.
"""

from .errors import BagError, BagMessageError, BagReadError
from .reader import OpenBag, is_bag, open_bag
from .typestore import typestore
from .writer import BagWriteError, SplitBagWriter

__all__ = ['BagError', 'BagMessageError', 'BagReadError', 'BagWriteError', 'OpenBag', 'SplitBagWriter', 'is_bag', 'open_bag',
           'typestore']
