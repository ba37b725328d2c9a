package fsm

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Bucket layout of the FSM database.
var (
	bucketMeta     = []byte("meta")     // appliedIndex → uint64
	bucketSessions = []byte("sessions") // session_id → fsmpb.Session
	bucketJournal  = []byte("journal")  // session_id 0x00 first_seq(8, big endian) → fsmpb.EventChunk
	bucketRequests = []byte("requests") // request_id → fsmpb.Result
	bucketExpiry   = []byte("expiry")   // time(8) request_id → nil: dedup retention index
	// session_id 0x00 attachment_id → fsmpb.Attachment
	bucketAttachments = []byte("attachments")
	bucketEnvelopes   = []byte("envelopes") // envelope_id → fsmpb.Envelope
	bucketLaunches    = []byte("launches")  // launch_id → fsmpb.Launch
	// parent_session 0x00 child_session → fsmpb.LineageEdge
	bucketLineage = []byte("lineage")
	bucketNodes   = []byte("nodes")    // node name → fsmpb.NodeRecord
	bucketACL     = []byte("acl")      // accessor id → fsmpb.AclToken
	bucketACLHash = []byte("acl_hash") // secret SHA-256 → accessor id
	bucketAudit   = []byte("audit")    // seq(8, big endian) → fsmpb.AuditEntry

	keyAppliedIndex = []byte("applied_index")
)

var allBuckets = [][]byte{bucketMeta, bucketSessions, bucketJournal, bucketRequests, bucketExpiry, bucketAttachments, bucketEnvelopes, bucketLaunches, bucketLineage, bucketNodes, bucketACL, bucketACLHash, bucketAudit}

// openDB opens (creating if needed) a bbolt database with every bucket.
//
// The FSM database is derived state: durability lives in the Raft log, whose
// appends are fsynced, so the FSM skips fsync (NoSync) and is rebuilt from the
// latest snapshot plus the log on start. InitialMmapSize is large so that a
// long snapshot read transaction rarely blocks a writer on a remap.
func openDB(path string) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         5 * time.Second,
		NoSync:          true,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: 1 << 30,
	})
	if err != nil {
		return nil, fmt.Errorf("open fsm db %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init fsm db: %w", err)
	}
	return db, nil
}

// freshDB removes any previous database at path and opens an empty one.
func freshDB(path string) (*bolt.DB, error) {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return openDB(path)
}

func journalKey(sessionID string, seq uint64) []byte {
	k := make([]byte, len(sessionID)+1+8)
	copy(k, sessionID)
	k[len(sessionID)] = 0
	binary.BigEndian.PutUint64(k[len(sessionID)+1:], seq)
	return k
}

func attachmentKey(sessionID, attachmentID string) []byte {
	return append(append([]byte(sessionID), 0), attachmentID...)
}

func expiryKey(t int64, requestID string) []byte {
	k := make([]byte, 8+len(requestID))
	binary.BigEndian.PutUint64(k, uint64(t))
	copy(k[8:], requestID)
	return k
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func readU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
