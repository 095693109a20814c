// Package staging hands clients on the same host shared-memory staging
// segments, so a block moves between a client's buffer and the store with
// one copy on each side and no bytes on a socket.
//
// A client connects to the server's unix socket and sends one line of JSON,
// {"token": "...", "size": N}. The server creates a sealed memfd of N bytes
// (rdma.NewSharedMemory), answers one line, {"session": ID, "size": N}, and
// passes the descriptor with SCM_RIGHTS. The client maps it. The session
// lives as long as that connection: when the client closes it (or dies),
// the server waits for requests still copying into the segment and frees
// it; what the client still maps of it reads as zeros. Requests that move bytes name the session by ID (the HTTP API's
// /v1/shm endpoints); the ID is a random 128-bit secret and the session is
// bound to the principal that opened it.
//
//	srv, err := staging.New(staging.Options{Listen: "@yuebing-shm"})
//	go srv.Serve()
//	sess, release, err := srv.Acquire(id, owner)
//	copy(sess.Bytes()[off:], block) // while acquired
//	release()
//
// Memory is bounded by Options: a session's size, the sum over all of
// them and over one owner's (so one principal cannot take every session).
// The bound holds whatever a client does: a freed session's pages are
// released even if the client still maps the segment. Connections that
// have not sent their request yet are bounded too (MaxPending,
// HelloTimeout), and a failed accept (out of descriptors) is retried, so
// local clients that connect and say nothing cannot stop the server.
package staging
