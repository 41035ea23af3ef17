"""Writing to the API: server-side apply of owned objects, status with conditions and Events."""
