package fsm

const maxPrunePerEntry = maxPrunePerBatch
const MaxRequestIDBytes = 256
