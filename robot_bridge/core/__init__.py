"""Transport-independent core of the bridge: decoders, stream alignment, action limits, the
episode state machine, the control loop, the recorder and the policy source."""
