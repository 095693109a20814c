// Package resp is `yuebing bench resp`: the same redis-benchmark command
// lines against yuebing's RESP front end and against redis-server.
package resp
