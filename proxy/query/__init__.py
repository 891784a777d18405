"""The query pipeline of one dataset, with no knowledge of the wire: service, planning, explain and the
`veil.budget` view."""
