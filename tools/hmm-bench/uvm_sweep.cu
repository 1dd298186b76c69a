// SPDX-License-Identifier: MIT
/*
 * uvm_sweep.cu — the kernel hmm-bench uvm sweeps its working set with:
 * every float of [p, p + n) gets 1 added (a read and a write of each
 * byte, as an optimizer step touches its parameters), grid-stride, 16
 * bytes per access.  A CPU reference is the same loop; the bench checks
 * each block's first and last floats against the number of sweeps.
 *
 * Built by the Makefile with nvcc --fatbin (sm_80, sm_90a, compute_80
 * PTX) and embedded in hmm-bench (uvm_fatbin.S), which loads it through
 * the driver API (cuModuleLoadData): no CUDA runtime is linked, so
 * hmm-bench runs where no GPU is.
 *
 * History: v1, this one: unmeasured (no GPU yet).
 */
extern "C" __global__ void hb_uvm_sweep(float4 *p, unsigned long long n4)
{
	unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x +
			       threadIdx.x;
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;

	for (; i < n4; i += stride) {
		float4 v = p[i];

		v.x += 1.0f;
		v.y += 1.0f;
		v.z += 1.0f;
		v.w += 1.0f;
		p[i] = v;
	}
}
