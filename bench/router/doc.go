// Package router is `yuebing bench router`: what the conductor's router adds
// to a request, against calling the engine directly.
package router
