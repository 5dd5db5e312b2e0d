"""Exports of stored episodes to other tools' formats (docs/store.md).

foxglove    one episode as an MCAP file with Foxglove's schemas (`export_episode`, `write_episode`)

Importing this package loads no exporter's SDK; the functions that need one import it.
"""
