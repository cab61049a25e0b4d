package remoting

// SendBatchZstd is EdgeMQ's own request code for a batch send whose body is the items of a
// SEND_BATCH_MESSAGE body compressed whole as one zstd frame; its header is
// SEND_BATCH_MESSAGE's (the one-letter form). It is outside RocketMQ's codes, so a broker
// that does not know it (Apache RocketMQ, an EdgeMQ before it, or one with it turned off)
// answers REQUEST_CODE_NOT_SUPPORTED and stores nothing: a compressed body is never taken
// for messages.
const SendBatchZstd int16 = 32320
