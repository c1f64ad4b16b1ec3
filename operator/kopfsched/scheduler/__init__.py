"""The scheduling loop: one serialized scheduling cycle, concurrent binding cycles, failure handling."""
