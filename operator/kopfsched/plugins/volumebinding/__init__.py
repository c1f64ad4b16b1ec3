"""VolumeBinding: the plugin adapter (`plugin.py`) over the volume binder (`binder.py`)."""

from kopfsched.plugins.volumebinding.plugin import PLUGIN, VolumeBinding, VolumeBindingArgs

__all__ = ["PLUGIN", "VolumeBinding", "VolumeBindingArgs"]
