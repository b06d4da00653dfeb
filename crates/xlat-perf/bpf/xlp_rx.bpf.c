// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * xlat-perf AF_XDP receive program (`--io xdp`): attached to the receiving
 * interface for one trial. IPv4 / IPv6 UDP frames whose payload starts with
 * the test signature "XLPT" go to the AF_XDP socket of their receive queue
 * (XSKMAP); everything else (ARP, ND, other traffic, fragments) passes to
 * the kernel's stack unchanged. A frame whose queue has no socket passes too.
 * The tester checks checksums, signature and stream id itself.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xlp_xsks SEC(".maps");

/* "XLPT" as it lies in memory. */
#define XLP_SIG (('X') | ('L' << 8) | ('P' << 16) | ((__u32)'T' << 24))

SEC("xdp")
int xlp_rx(struct xdp_md *ctx)
{
	unsigned char *data = (unsigned char *)(long)ctx->data;
	unsigned char *end = (unsigned char *)(long)ctx->data_end;
	unsigned char *l4;
	__u16 proto;

	if (data + 14 > end)
		return XDP_PASS;
	proto = *(__u16 *)(data + 12);
	if (proto == bpf_htons(ETH_P_IP)) {
		unsigned char *ip = data + 14;
		__u32 ihl;

		if (ip + 20 > end)
			return XDP_PASS;
		if ((ip[0] >> 4) != 4 || ip[9] != IPPROTO_UDP)
			return XDP_PASS;
		/* Fragments (offset or MF) are left to the stack. */
		if (*(__u16 *)(ip + 6) & bpf_htons(0x3fff))
			return XDP_PASS;
		ihl = (ip[0] & 15) * 4;
		if (ihl < 20)
			return XDP_PASS;
		l4 = ip + ihl;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		unsigned char *ip6 = data + 14;

		if (ip6 + 40 > end)
			return XDP_PASS;
		if (ip6[6] != IPPROTO_UDP)
			return XDP_PASS;
		l4 = ip6 + 40;
	} else {
		return XDP_PASS;
	}
	if (l4 + 12 > end)
		return XDP_PASS;
	if (*(__u32 *)(l4 + 8) != XLP_SIG)
		return XDP_PASS;
	return bpf_redirect_map(&xlp_xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
