package bench

// The prefill compute model of the Mooncake paper (section 2.2, equation 1)
// with LLaMA3-70B's shape: flops(n) = l*(a*n^2*d + b*n*d^2). The a*n^2 term is
// attention over the prompt, the b*n term the dense layers.
const (
	flopsLayers = 80   // l: transformer layers
	flopsHidden = 8192 // d: hidden size
	flopsA      = 4    // a: attention coefficient
	flopsB      = 22   // b: MLP and projection coefficient
)

// PrefillFLOPs returns the paper's prefill FLOPs for a prompt of n tokens.
// Reusing the KV cache of a p-token prefix leaves flops(n) - flops(p) to
// compute, so a hit of p tokens saves exactly PrefillFLOPs(p).
func PrefillFLOPs(n int64) float64 {
	x := float64(n)
	return flopsLayers * (flopsA*x*x*flopsHidden + flopsB*x*flopsHidden*flopsHidden)
}
