"""Nearest-neighbour search behind one small interface, whatever library and device."""
