"""Grounding: robot signals (plain numpy values, no ROS) → named predicate
values ``True``/``False``/``None`` (unknown), one class per source.  The only
robot-specific layer; configured per robot/scene (config/robots/)."""

from .base import Freshness, InputHealth, Predicates
from .contacts import ContactConfig, ContactGrounding, ContactSample, WrenchConfig, WrenchGrounding
from .geometry import Shape, SupportSurface
from .joints import GripperCalibration, JointConfig, JointStateGrounding
from .tf import TfConfig, TfGrounding, TransformTree
from .tracking import TrackConfig

__all__ = ['ContactConfig', 'ContactGrounding', 'ContactSample', 'Freshness', 'InputHealth', 'JointConfig',
           'GripperCalibration', 'JointStateGrounding', 'Predicates', 'Shape', 'SupportSurface', 'TfConfig', 'TfGrounding', 'TrackConfig', 'TransformTree', 'WrenchConfig',
           'WrenchGrounding']
