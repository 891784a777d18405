"""The wire server: the asyncio listener, one Session per connection, prepared statements, cancel keys
and the audit trail of each client message."""
