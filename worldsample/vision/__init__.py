"""The policy's image encoder: a small CNN over one or more uint8 cameras, pretrained here on the
demonstrations (behaviour cloning under random shifts, optionally + inverse dynamics) and then
frozen; its output is a vector observation key (`latent`) the MLP actor, critic and world model
consume beside `proprio`. Imports torch: the robot PC runs the exported ONNX file instead
(worldsample.policy.onnx_actor).

    Encoder, EncoderConfig, save_encoder, load_encoder, encode_frames   (encoder.py)
    random_shift                                                          (augment.py)
    load_demos, pretrain, pretrain_from_run, PretrainConfig               (pretrain.py)
"""

from worldsample.vision.encoder import (
    Encoder,
    EncoderConfig,
    VisionError,
    encode_frames,
    image_key,
    load_encoder,
    save_encoder,
)

__all__ = ["Encoder", "EncoderConfig", "VisionError", "encode_frames", "image_key", "load_encoder", "save_encoder"]
