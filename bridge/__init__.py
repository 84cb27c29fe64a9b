"""The bridge service: v1 mailserver and v2 store in one aiohttp process, archiving and
seeding on a schedule."""
