"""Availability and operations under faults and abuse (issue 13): each test drives a real `veil serve`."""
