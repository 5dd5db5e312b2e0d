"""Reading an exported .mcap back with the `mcap` package (not the writer's SDK): the summary,
every message per topic, JSON and protobuf payloads decoded from the schemas in the file."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from mcap.reader import make_reader
from PIL import Image


@dataclass
class Read:
    schemas: dict[str, tuple[str, str]] = field(default_factory=dict)  # topic -> (schema name, schema encoding)
    encodings: dict[str, str] = field(default_factory=dict)  # topic -> message encoding
    times: dict[str, list[int]] = field(default_factory=dict)  # topic -> log times in file order
    messages: dict[str, list] = field(default_factory=dict)  # topic -> decoded messages
    counts: dict[str, int] = field(default_factory=dict)  # topic -> count in the summary's statistics
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)


def _proto_class(schema):
    pool = descriptor_pool.DescriptorPool()
    for fd in descriptor_pb2.FileDescriptorSet.FromString(schema.data).file:
        pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(schema.name))


def read_mcap(data: bytes) -> Read:
    out = Read()
    reader = make_reader(io.BytesIO(data))
    summary = reader.get_summary()
    for cid, ch in summary.channels.items():
        s = summary.schemas[ch.schema_id]
        out.schemas[ch.topic] = (s.name, s.encoding)
        out.encodings[ch.topic] = ch.message_encoding
        out.counts[ch.topic] = summary.statistics.channel_message_counts.get(cid, 0)
    classes = {}
    for schema, ch, msg in reader.iter_messages(log_time_order=False):
        out.times.setdefault(ch.topic, []).append(msg.log_time)
        if ch.message_encoding == "json":
            value = json.loads(msg.data)
        else:
            cls = classes.setdefault(schema.id, _proto_class(schema))
            value = cls.FromString(msg.data)
        out.messages.setdefault(ch.topic, []).append(value)
    for m in reader.iter_metadata():
        out.metadata[m.name] = dict(m.metadata)
    return out


def jpeg_pixels(msg) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(msg.data)).convert("RGB"))
