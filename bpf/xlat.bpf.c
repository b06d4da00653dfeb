// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * xlat eBPF fast path: tc (clsact, direct-action) ingress program that
 * translates the common case of SIIT / CLAT (RFC 7915, RFC 6052, RFC 7757)
 * before routing, and hands everything else, unchanged, to the kernel,
 * which routes it into the TUN device where the Rust datapath handles it.
 *
 * The Rust core (crates/xlat-core) is the reference: a packet translated
 * here must be byte-identical to the core's translation with the
 * "Decrement" TTL policy (the program forwards the packet itself with
 * bpf_redirect_neigh, so the kernel does not decrement again: one hop).
 * The differential test (crates/xlat/tests/ebpf_diff.rs) checks this with
 * BPF_PROG_TEST_RUN.
 *
 * A packet is translated only if the kernel would route it into the TUN
 * (FIB lookup of the original packet), and only if the translated packet
 * has a route that does not lead back into the TUN. The address tables
 * (EAMT, denylist) and the config are double-buffered by a generation
 * number written last by the loader, so updates are atomic per packet.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

/* Branch hints. Every branch to the slow path (pass()), to a helper's
 * failure and to a route cache miss is unlikely: clang then lays the
 * translated packet's path out as one straight run of code and moves the
 * rest after it, so a packet reaching an idle translator pulls fewer cold
 * cache lines of the program (docs/datapaths.md: with pass() out of line,
 * 0.88x the program's time per run at pings 10 ms apart). */
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define IPPROTO_ICMPV6_ 58
#define PACKET_HOST_ 0 /* linux/if_packet.h */

/* cfg.flags: keep in sync with crates/xlat/src/ebpf.rs */
#define F_ENABLED 1u
#define F_TEST 2u          /* no FIB lookups, no redirect: return TC_ACT_REDIRECT */
#define F_ZEROIZE_TC 4u
#define F_OVERRIDE_TOS 8u
#define F_HAIRPIN_INTRINSIC 16u
#define F_HAIRPIN_SIMPLE 32u
#define F_NAT64 64u        /* stateful NAT64 (the loader checks it against XLAT_NAT64) */
#define F_SRC_EAM_ONLY 128u /* CLAT, RFC 6877 section 6.3: IPv4 sources by the EAMT only */
#define TCP_FIN_SYN_RST 0x07

/* The mode, fixed when the program is built: this source is compiled once
 * per mode (crates/xlat/build.rs), XLAT_NAT64 1 for stateful NAT64 and 0
 * for SIIT and CLAT, and the loader takes the object of the configured mode
 * (crates/xlat/src/ebpf.rs; a change of mode needs a restart). Each object
 * carries only its own mode's code, compiled for it: fewer instructions,
 * registers spilled and cache lines on a packet's path, which is what a
 * packet arriving at an idle translator pays for (docs/datapaths.md). */
#ifndef XLAT_NAT64
#error "build with -DXLAT_NAT64=0 (SIIT, CLAT) or -DXLAT_NAT64=1 (stateful NAT64)"
#endif

struct xlat_cfg {
	__u32 flags;
	__u32 tos;
	__u32 pool6_len;       /* 0: no pool6 */
	__u32 lowest_ipv6_mtu; /* RFC 7915 section 4: IPv4 without DF above this is fragmented */
	__u32 ipv6_mtu;        /* 0: none (TUN MTU: bigger DF packets get Frag Needed) */
	__u32 tun_ifindex;
	__u8 pool6[16];
};

/* Counter indexes: keep in sync with crates/xlat/src/ebpf.rs COUNTERS. */
enum {
	C_V6TO4 = 0,
	C_V4TO6,
	P_NOT_IP,
	P_DISABLED,
	P_NOT_FOR_XLAT,
	P_V4_OPTIONS,
	P_FRAGMENT,
	P_V6_EXT,
	P_TTL,
	P_PROTO,
	P_ICMP,
	P_UDP_CSUM0,
	P_UNMAPPED,
	P_DENIED,
	P_HAIRPIN,
	P_TOO_BIG,
	P_NO_ROUTE,
	P_MALFORMED,
	P_UNSUPPORTED, /* bpf_skb_change_proto refused (e.g. a GSO type) */
	D_ERROR,
	P_NAT64_NO_FLOW, /* NAT64: not a cached flow (new flow, not yet cached, ...) */
	P_NAT64_TCP,     /* NAT64: TCP SYN / FIN / RST: the slow path's state machine */
	C_V6TO4_BYTES,   /* IP bytes of the translated packets (C_V6TO4's) */
	C_V4TO6_BYTES,
	C_MAX,
};

struct lpm4 {
	__u32 plen;
	__u32 gen;
	__u8 a[4];
};
struct lpm6 {
	__u32 plen;
	__u32 gen;
	__u8 a[16];
};

/* An EAMT entry (RFC 7757), looked up by either side. */
struct eam {
	__u8 v6[16]; /* IPv6 prefix (host bits zero) */
	__u8 v4[4];  /* IPv4 prefix (host bits zero) */
	__u32 s4;    /* IPv4 suffix length: 32 - v4 prefix length */
	__u32 shift; /* (128 - v6 prefix length) - s4 */
	__u32 v6len;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} xlat_gen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct xlat_cfg);
} xlat_cfg SEC(".maps");

/* The daemon's lease (CLOCK_MONOTONIC ns; the program reads it with the
 * coarse clock, bpf_ktime_get_coarse_ns): the program
 * translates only while the daemon renews it. A daemon that dies without
 * detaching (SIGKILL, a crash) leaves the filters attached; within the lease
 * they stop translating with its stale configuration and pass everything
 * on. ~0: no lease (loaded, not attached: the differential tests). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} xlat_lease SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 131072);
	__type(key, struct lpm4);
	__type(value, struct eam);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} xlat_eam4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 131072);
	__type(key, struct lpm6);
	__type(value, struct eam);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} xlat_eam6 SEC(".maps");

/* IPv4 addresses the fast path leaves to the slow path: bit 1 denylist,
 * bit 2 not global (RFC 6052 section 3.1, only with the WKP). */
#define S_DENY 1u
#define S_NONGLOBAL 2u
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 8192);
	__type(key, struct lpm4);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} xlat_slow4 SEC(".maps");

/*
 * NAT64 flow cache (RFC 6146 sessions of UDP and ICMP echo), written by the
 * Rust datapath only: one entry per direction of each cached session. The
 * program reads the translation and writes the last-seen time (ktime ns),
 * which the Rust side reads before it expires the session.
 * Keep in sync with crates/xlat/src/ebpf.rs (FlowCache).
 */
struct flow_key {
	__u8 dir;   /* 0: IPv6 -> IPv4, 1: IPv4 -> IPv6 */
	__u8 proto; /* IPPROTO_UDP or IPPROTO_ICMP (ICMPv6 echo too) */
	__u16 pad;
	__be16 sport; /* ICMP: the identifier in both */
	__be16 dport;
	__u8 src[16]; /* IPv4: first 4 bytes, the rest zero */
	__u8 dst[16];
};

struct flow_val {
	__u64 seen;   /* bpf_ktime_get_ns() of the last packet translated */
	__u8 src[16]; /* translated addresses (IPv4: first 4 bytes) */
	__u8 dst[16];
	__be16 sport; /* translated ports; ICMP: 6->4 sport, 4->6 dport = new id */
	__be16 dport;
	__u32 pad;
};

/* Not preallocated: an entry the Rust side deletes is freed after an RCU
 * grace period, so a packet that found it never reads another flow's
 * translation (a preallocated entry is reused at once). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 131072);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct flow_key);
	__type(value, struct flow_val);
} xlat_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__type(key, __u32);
	__type(value, __u64);
} xlat_counters SEC(".maps");

/* The flow map entry of a packet in direction dir (0: 6->4, 1: 4->6):
 * TCP/UDP by their ports, ICMP echo by its identifier in both; alen 16 or 4
 * address bytes. */
static __always_inline struct flow_val *flow_lookup(__u8 dir, int icmp, __u8 proto,
						    const __u8 *l4b, const __u8 *src,
						    const __u8 *dst, __u32 alen)
{
	struct flow_key fk = {};
	fk.dir = dir;
	fk.proto = icmp ? IPPROTO_ICMP : proto;
	if (!icmp) {
		__builtin_memcpy(&fk.sport, l4b, 2);
		__builtin_memcpy(&fk.dport, l4b + 2, 2);
	} else {
		__builtin_memcpy(&fk.sport, l4b + 4, 2);
		__builtin_memcpy(&fk.dport, l4b + 4, 2);
	}
	if (alen == 16) {
		__builtin_memcpy(fk.src, src, 16);
		__builtin_memcpy(fk.dst, dst, 16);
	} else {
		__builtin_memcpy(fk.src, src, 4);
		__builtin_memcpy(fk.dst, dst, 4);
	}
	return bpf_map_lookup_elem(&xlat_flows, &fk);
}

/* len bytes at off of the packet into to: read in place when they are in
 * the linear part (the usual case; no helper call), else copied by the
 * helper. 0, or < 0 if the packet is shorter. */
static __always_inline long load(struct __sk_buff *skb, __u32 off, void *to, __u32 len)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	if (data + off + len <= end) {
		__builtin_memcpy(to, data + off, len);
		return 0;
	}
	return bpf_skb_load_bytes(skb, off, to, len);
}

static __always_inline int count_n(__u32 i, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&xlat_counters, &i);
	if (c)
		*c += n;
	return 0;
}

static __always_inline int count(__u32 i)
{
	return count_n(i, 1);
}

/* Not ours, or for the slow path: on up the stack. TC_ACT_UNSPEC, not
 * TC_ACT_OK: the filters after ours on the hook (another xlat's, an
 * operator's) still see the packet; at the end of the chain it passes.
 * A function of its own (a BPF-to-BPF call), not inlined at each of its
 * call sites: the translated packet's path stays shorter (see likely()). */
static __attribute__((noinline)) int pass(__u32 reason)
{
	count(reason);
	return TC_ACT_UNSPEC;
}

struct hdr4 {
	__u8 vihl;
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag;
	__u8 ttl;
	__u8 proto;
	__be16 csum;
	__u8 src[4];
	__u8 dst[4];
};

struct hdr6 {
	__be32 vtcfl;
	__be16 plen;
	__u8 nh;
	__u8 hop;
	__u8 src[16];
	__u8 dst[16];
};

/* A translated packet's new IP header, followed by the first L4 bytes
 * that finish() writes with it (ICMP: the 8-byte header; NAT64 TCP/UDP:
 * the ports). */
struct out4 {
	struct hdr4 ip;
	__u8 l4[8];
};
struct out6 {
	struct hdr6 ip;
	__u8 l4[8];
};

static __always_inline __u16 fold(__u64 s)
{
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)s;
}

/* RFC 1624 equation 3, as checksum::update(field, old, new) in the core. */
static __always_inline __u16 icsum_update(__u16 field, __u16 old, __u16 new)
{
	__u64 acc = (__u64)(__u16)~field + (__u16)~old + new;
	return ~fold(acc);
}

/* Sum of big-endian 16-bit words of a 4-byte aligned buffer. */
static __always_inline __u64 sum_words(const void *p, int n)
{
	const __u16 *w = p;
	__u64 s = 0;
#pragma unroll
	for (int i = 0; i < n / 2; i++)
		s += bpf_ntohs(w[i]);
	return s;
}

/* RFC 6052 section 2.2: embed a in pool6 (all six lengths). */
static __always_inline int embed(const struct xlat_cfg *c, const __u8 *a, __u8 *out)
{
	__u32 l = c->pool6_len;
	if (unlikely(l != 32 && l != 40 && l != 48 && l != 56 && l != 64 && l != 96))
		return -1;
	__builtin_memcpy(out, c->pool6, 16);
	/* bits past the prefix are zero: the loader clears them in pool6 */
	__u32 j = l / 8;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		if (j == 8)
			j++; /* the u-octet (bits 64-71) stays zero */
		if (j < 16)
			out[j & 15] = a[i];
		j++;
	}
	return 0;
}

/* RFC 6052 section 2.3: extract the IPv4 address from a (in pool6). */
static __always_inline int extract(const struct xlat_cfg *c, const __u8 *a, __u8 *out)
{
	__u32 l = c->pool6_len;
	if (unlikely(l != 32 && l != 40 && l != 48 && l != 56 && l != 64 && l != 96))
		return -1;
	__u32 n = l / 8;
	/* the prefix is compared outside the u-octet (bits 64-71) */
#pragma unroll
	for (int i = 0; i < 12; i++)
		if (unlikely(i != 8 && (__u32)i < n && a[i] != c->pool6[i]))
			return -1;
	/* a non-zero u-octet is dropped by the core: slow path */
	if (a[8] != 0)
		return -2;
	__u32 j = n;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		if (j == 8)
			j++;
		out[i] = a[j & 15];
		j++;
	}
	return 0;
}

static __always_inline __u64 be64_at(const __u8 *p)
{
	__u64 v = 0;
#pragma unroll
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

static __always_inline void put64(__u8 *p, __u64 v)
{
#pragma unroll
	for (int i = 7; i >= 0; i--) {
		p[i] = v & 0xff;
		v >>= 8;
	}
}

/* RFC 7757 section 3.2: IPv4 -> IPv6 through an EAM entry. */
static __always_inline void eam_map4(const struct eam *e, const __u8 *a, __u8 *out)
{
	__u32 v = ((__u32)a[0] << 24) | ((__u32)a[1] << 16) | ((__u32)a[2] << 8) | a[3];
	__u32 s4 = e->s4 & 63;
	__u64 suffix = s4 >= 32 ? v : (v & ((1u << s4) - 1));
	__u64 hi = be64_at(e->v6), lo = be64_at(e->v6 + 8);
	__u32 sh = e->shift;
	if (sh >= 64) {
		sh -= 64;
		if (sh < 64)
			hi |= suffix << sh;
	} else {
		lo |= suffix << sh;
		if (sh > 0)
			hi |= suffix >> (64 - sh);
	}
	put64(out, hi);
	put64(out + 8, lo);
}

/* RFC 7757 section 3.3: IPv6 -> IPv4 through an EAM entry. */
static __always_inline void eam_map6(const struct eam *e, const __u8 *a, __u8 *out)
{
	__u64 hi = be64_at(a), lo = be64_at(a + 8);
	__u32 hostbits = (128 - e->v6len) & 255;
	/* keep the host bits only */
	if (hostbits < 64) {
		hi = 0;
		lo &= hostbits ? (~0ull >> (64 - hostbits)) : 0;
	} else if (hostbits < 128) {
		__u32 h = hostbits - 64;
		hi &= h ? (~0ull >> (64 - h)) : 0;
	}
	__u32 sh = e->shift;
	__u64 bits;
	if (sh >= 128)
		bits = 0;
	else if (sh >= 64)
		bits = hi >> (sh - 64);
	else if (sh == 0)
		bits = lo;
	else
		bits = (lo >> sh) | (hi << (64 - sh));
	__u32 s4 = e->s4 & 63;
	__u32 m = s4 >= 32 ? 0xffffffffu : ((1u << s4) - 1);
	__u32 v = ((__u32)e->v4[0] << 24) | ((__u32)e->v4[1] << 16) | ((__u32)e->v4[2] << 8) | e->v4[3];
	v |= (__u32)bits & m;
	out[0] = v >> 24;
	out[1] = v >> 16;
	out[2] = v >> 8;
	out[3] = v;
}

/* Whether IPv4 address a lies in an EAM entry's IPv4 side. */
static __always_inline int eam4_has(__u32 gen, const __u8 *a)
{
	struct lpm4 k = {.plen = 64, .gen = gen};
	__builtin_memcpy(k.a, a, 4);
	return bpf_map_lookup_elem(&xlat_eam4, &k) != 0;
}

static __always_inline __u32 slow4(__u32 gen, const __u8 *a)
{
	struct lpm4 k = {.plen = 64, .gen = gen};
	__builtin_memcpy(k.a, a, 4);
	__u32 *v = bpf_map_lookup_elem(&xlat_slow4, &k);
	return v ? *v : 0;
}

/* Outcome of an address mapping: 0 mapped by EAM, 1 by pool6, <0 pass reason. */
static __always_inline int map_4to6(const struct xlat_cfg *c, __u32 gen, const __u8 *a,
				    __u8 *out, int is_src)
{
	__u32 s = slow4(gen, a);
	if (s & S_DENY)
		return -P_DENIED;
	struct lpm4 k = {.plen = 64, .gen = gen};
	__builtin_memcpy(k.a, a, 4);
	struct eam *e = bpf_map_lookup_elem(&xlat_eam4, &k);
	if (e) {
		/* RFC 7757 section 4.2.1: simple hairpinning maps an EAM'd
		 * source with pool6: left to the slow path. */
		if (is_src && (c->flags & F_HAIRPIN_SIMPLE))
			return -P_HAIRPIN;
		eam_map4(e, a, out);
		return 0;
	}
	if (!c->pool6_len || (is_src && (c->flags & F_SRC_EAM_ONLY)))
		return -P_UNMAPPED;
	if (s & S_NONGLOBAL)
		return -P_DENIED;
	if (embed(c, a, out) < 0)
		return -P_UNMAPPED;
	return 1;
}

static __always_inline int map_6to4(const struct xlat_cfg *c, __u32 gen, const __u8 *a,
				    __u8 *out)
{
	if (a[0] == 0xff)
		return -P_UNMAPPED; /* RFC 7915 section 1.3: multicast */
	struct lpm6 k = {.plen = 160, .gen = gen};
	__builtin_memcpy(k.a, a, 16);
	struct eam *e = bpf_map_lookup_elem(&xlat_eam6, &k);
	if (e) {
		eam_map6(e, a, out);
		return 0;
	}
	if (!c->pool6_len)
		return -P_UNMAPPED;
	int r = extract(c, a, out);
	if (r == -2)
		return -P_DENIED;
	if (r < 0)
		return -P_UNMAPPED;
	if (slow4(gen, out))
		return -P_DENIED;
	return 1;
}

/*
 * Route cache: the results of bpf_fib_lookup by (ingress device, family,
 * TOS, source, destination), valid while the route generation (xlat_rgen)
 * is the one they were looked up under. The loader bumps the generation on
 * every rtnetlink link, address, route, rule and netconf change
 * (crates/xlat/src/route_watch.rs), so a cached route is at most one
 * notification old. The generation is read before a lookup, so a change
 * during the lookup also invalidates its result.
 *
 * Two kinds of entries share it (a daemon runs one mode):
 * - R_ROUTE (NAT64), keyed by the translated packet: its route, and
 *   whether the configuration (word cgen) refuses its remote address.
 * - R_SIIT, keyed by the packet as it arrived: the whole stateless
 *   decision, i.e. whether the kernel would route it into the TUN, the
 *   outcome of the address mapping (RFC 7915 / RFC 6052 / RFC 7757, the
 *   translated addresses or a pass reason) and the route of the translated
 *   packet. It also depends on the configuration, so it carries the
 *   configuration word (xlat_gen) it was computed under. One lookup then
 *   replaces two route lookups and up to four LPM lookups per packet,
 *   which matters most when the caches are cold (an idle path).
 */
#define R_ROUTE 1
#define R_SIIT 2

struct route_key {
	__u32 ifindex; /* ingress device */
	__u8 family;
	__u8 tos;
	__u16 pad;
	__u8 src[16]; /* IPv4: first 4 bytes, the rest zero */
	__u8 dst[16];
};

struct route_val {
	__u32 gen;      /* route generation */
	__u32 cgen;     /* R_SIIT: configuration word */
	__u32 kifindex; /* the key's device, family, TOS and the kind: */
	__u8 kfamily;   /* checked after the copy, like src and dst */
	__u8 ktos;
	__u8 kind;
	__u8 to_tun;      /* R_SIIT: the kernel would route the packet into the TUN */
	__u32 map_reason; /* R_SIIT: 0, or the address mapping's pass reason */
	__u32 ifindex;    /* output device of the (translated) packet; 0: no route */
	__u32 mtu;        /* the route's MTU */
	__u32 nh_family;
	__u8 nh[16];   /* next hop (IPv4: first 4 bytes) */
	__u8 src[16];  /* the key's addresses */
	__u8 dst[16];
	__u8 xsrc[16]; /* R_SIIT: the translated addresses (IPv4: first 4 bytes) */
	__u8 xdst[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_COMMON_LRU);
	__type(key, struct route_key);
	__type(value, struct route_val);
} xlat_routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} xlat_rgen SEC(".maps");

/* The smallest MTU of the routes that carry one (`ip route ... mtu N`), per
 * output device and family; ifindex 0: every device. bpf_fib_lookup
 * reports a route's MTU only when it is locked, while the kernel's
 * forwarding honours it always, so the loader reads the routes
 * (crates/xlat/src/route_mtu.rs) before it bumps xlat_rgen. */
struct route_mtu_key {
	__u32 ifindex;
	__u32 family;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2048); /* route_mtu.rs MAX_KEYS, twice */
	__type(key, struct route_mtu_key);
	__type(value, __u32);
} xlat_route_mtu SEC(".maps");

static __always_inline void lower_to_route_mtu(struct route_val *v, int family)
{
	struct route_mtu_key k = {.ifindex = v->ifindex, .family = family};
	__u32 *m = bpf_map_lookup_elem(&xlat_route_mtu, &k);
	if (m && *m < v->mtu)
		v->mtu = *m;
	k.ifindex = 0;
	m = bpf_map_lookup_elem(&xlat_route_mtu, &k);
	if (m && *m < v->mtu)
		v->mtu = *m;
}

/* Per-CPU scratch space of the route cache (the stack is too small for it),
 * one per family of the key. Its k and v also stay behind as this CPU's
 * last entry of that family, complete (every caller of cache_get stores
 * the entry it computed before it returns), and are looked at before the
 * shared cache: the packets of one flow (a ping's requests, or its
 * replies) then skip the hash, the bucket and the entry, which is what a
 * packet of an idle path pays for most (cold cache lines). Its validity
 * is the shared entry's: the same route generation, configuration word
 * and kind. (Programs of one CPU do not nest: tc runs in the receive
 * softirq, as the scratch space already assumes.) */
struct route_scratch {
	struct bpf_fib_lookup p;
	struct route_key k;
	struct route_val v;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct route_scratch);
} xlat_rscratch SEC(".maps");

static __always_inline void fib_params(struct bpf_fib_lookup *p, struct __sk_buff *skb, int family,
				       const __u8 *src, const __u8 *dst, __u8 tos, __u16 tot_len)
{
	__builtin_memset(p, 0, sizeof(*p));
	p->family = family;
	p->ifindex = skb->ingress_ifindex;
	p->tot_len = tot_len;
	if (family == AF_INET) {
		p->tos = tos;
		__builtin_memcpy(&p->ipv4_src, src, 4);
		__builtin_memcpy(&p->ipv4_dst, dst, 4);
	} else {
		/* The Traffic Class, for `ip -6 rule ... dsfield`: the kernel
		 * reads it from the flow information (ip6_tclass()). */
		p->flowinfo = bpf_htonl((__u32)tos << 20);
		__builtin_memcpy(p->ipv6_src, src, 16);
		__builtin_memcpy(p->ipv6_dst, dst, 16);
	}
}

/* Only the output device, next hop and MTU matter, not the neighbour
 * (Linux >= 6.5; older kernels refuse the flag, then it is left out). */
static __always_inline long fib(struct __sk_buff *skb, struct bpf_fib_lookup *p)
{
	long rc = bpf_fib_lookup(skb, p, sizeof(*p), BPF_FIB_LOOKUP_SKIP_NEIGH);
	if (rc < 0)
		rc = bpf_fib_lookup(skb, p, sizeof(*p), 0);
	return rc;
}

static __always_inline int same16(const __u8 *a, const __u8 *b)
{
	__u64 a0, a1, b0, b1;
	__builtin_memcpy(&a0, a, 8);
	__builtin_memcpy(&a1, a + 8, 8);
	__builtin_memcpy(&b0, b, 8);
	__builtin_memcpy(&b1, b + 8, 8);
	return a0 == b0 && a1 == b1;
}

static __always_inline int same4(const __u8 *a, const __u8 *b)
{
	__u32 x, y;
	__builtin_memcpy(&x, a, 4);
	__builtin_memcpy(&y, b, 4);
	return x == y;
}

/* 1 if sc holds a valid entry for the key: this CPU's last one of the
 * family, or the shared cache's copied into sc->v; else 0, with sc's key
 * set and sc->v started afresh for the caller.
 * The entry is copied out and checked: an LRU entry that another CPU
 * replaces is reused at once, not after RCU. */
static __always_inline int cache_get(struct route_scratch *sc, struct __sk_buff *skb, int family,
				     const __u8 *src, const __u8 *dst, __u8 tos, __u8 kind,
				     __u32 rgen, __u32 cgen)
{
	struct route_key *k = &sc->k;
	struct route_val *v = &sc->v;
	__u32 ifindex = skb->ingress_ifindex;
	/* This CPU's last entry of the family (see struct route_scratch). */
	if (v->gen == rgen && v->cgen == cgen && v->kind == kind && k->ifindex == ifindex &&
	    k->family == family && k->tos == tos &&
	    (family == AF_INET ? same4(k->src, src) && same4(k->dst, dst)
			       : same16(k->src, src) && same16(k->dst, dst)))
		return 1;
	__builtin_memset(k, 0, sizeof(*k));
	k->ifindex = ifindex;
	k->family = family;
	k->tos = tos;
	if (family == AF_INET) {
		__builtin_memcpy(k->src, src, 4);
		__builtin_memcpy(k->dst, dst, 4);
	} else {
		__builtin_memcpy(k->src, src, 16);
		__builtin_memcpy(k->dst, dst, 16);
	}
	struct route_val *e = bpf_map_lookup_elem(&xlat_routes, k);
	if (e) {
		__builtin_memcpy(v, e, sizeof(*v));
		if (v->gen == rgen && v->cgen == cgen && v->kind == kind &&
		    v->kifindex == k->ifindex && v->kfamily == family && v->ktos == tos &&
		    same16(v->src, k->src) && same16(v->dst, k->dst))
			return 1;
	}
	__builtin_memset(v, 0, sizeof(*v));
	v->gen = rgen;
	v->cgen = cgen;
	v->kifindex = k->ifindex;
	v->kfamily = family;
	v->ktos = tos;
	v->kind = kind;
	__builtin_memcpy(v->src, k->src, 16);
	__builtin_memcpy(v->dst, k->dst, 16);
	return 0;
}

/* The route of (family, src, dst, tos) into v's ifindex, next hop and MTU
 * (ifindex 0: no route). A lookup whose length exceeds any MTU reports the
 * route's MTU (FRAG_NEEDED) before anything else; the second one, the
 * device. The MTU is then lowered to xlat_route_mtu's for the device. */
static __always_inline void fib_route(struct route_scratch *sc, struct __sk_buff *skb, int family,
				      const __u8 *src, const __u8 *dst, __u8 tos)
{
	struct bpf_fib_lookup *p = &sc->p;
	struct route_val *v = &sc->v;
	fib_params(p, skb, family, src, dst, tos, 0xffff);
	long rc = fib(skb, p);
	v->mtu = 0xffff;
	v->ifindex = 0;
	if (rc == BPF_FIB_LKUP_RET_FRAG_NEEDED) {
		v->mtu = p->mtu_result;
		fib_params(p, skb, family, src, dst, tos, 1);
		rc = fib(skb, p);
	}
	if (rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		v->ifindex = p->ifindex;
		v->nh_family = p->family;
		if (p->family == AF_INET)
			__builtin_memcpy(v->nh, &p->ipv4_dst, 4);
		else
			__builtin_memcpy(v->nh, p->ipv6_dst, 16);
		lower_to_route_mtu(v, family);
	}
}

/* RFC 7915 section 5.1: the TOS of an IPv4 packet translated from one with
 * Traffic Class tc (the route of the translation is looked up with it). */
static __always_inline __u8 tos_of(const struct xlat_cfg *c, __u8 tc)
{
	return (c->flags & F_OVERRIDE_TOS) ? (__u8)c->tos : tc;
}

/* RFC 7915 section 4.1: the Traffic Class of an IPv6 packet translated
 * from one with TOS tos (zeroize-traffic-class: 0). */
static __always_inline __u8 tc_of(const struct xlat_cfg *c, __u8 tos)
{
	return (c->flags & F_ZEROIZE_TC) ? 0 : tos;
}

static __always_inline struct route_scratch *scratch(__u32 *rgen, int family)
{
	__u32 z = 0, slot = family == AF_INET6;
	__u32 *rg = bpf_map_lookup_elem(&xlat_rgen, &z);
	struct route_scratch *sc = bpf_map_lookup_elem(&xlat_rscratch, &slot);
	if (!rg || !sc)
		return 0;
	*rgen = *rg;
	return sc;
}

/* NAT64: the route of the translated packet, from the cache or by FIB
 * lookups (then cached, under configuration word cw), and whether the
 * configuration refuses the remote IPv4 address remote4 (map_reason
 * P_DENIED: the denylist, or RFC 6052 section 3.1 with the WKP). A cached
 * session outlives a SIGHUP that denies its remote, but the core then drops
 * its packets both ways (RFC 7915 section 4.1 / 5.1 address mapping before
 * the session lookup): so must the fast path. No FIB lookups in test mode.
 * 0 if the maps fail. */
static __always_inline struct route_val *route(struct __sk_buff *skb, const struct xlat_cfg *c,
					       __u32 cw, int family, const __u8 *src,
					       const __u8 *dst, __u8 tos, const __u8 *remote4)
{
	__u32 rgen;
	struct route_scratch *sc = scratch(&rgen, family);
	if (!sc)
		return 0;
	if (likely(cache_get(sc, skb, family, src, dst, tos, R_ROUTE, rgen, cw)))
		return &sc->v;
	if (slow4(cw & 1, remote4))
		sc->v.map_reason = P_DENIED;
	if (!(c->flags & F_TEST))
		fib_route(sc, skb, family, src, dst, tos);
	bpf_map_update_elem(&xlat_routes, &sc->k, &sc->v, BPF_ANY);
	return &sc->v;
}

/* SIIT: the stateless decision for a packet (family, src, dst, tos) as it
 * arrived, under configuration word cw; 0 if the maps fail. */
static __always_inline struct route_val *siit_decide(struct __sk_buff *skb,
						     const struct xlat_cfg *c, __u32 cw,
						     int family, const __u8 *src,
						     const __u8 *dst, __u8 tos)
{
	__u32 rgen;
	struct route_scratch *sc = scratch(&rgen, family);
	if (!sc)
		return 0;
	struct route_val *v = &sc->v;
	if (likely(cache_get(sc, skb, family, src, dst, tos, R_SIIT, rgen, cw)))
		return v;
	__u32 gen = cw & 1;
	int test = c->flags & F_TEST;
	if (test) {
		v->to_tun = 1;
	} else {
		/* Would the kernel route it into the TUN (with its TOS or
		 * Traffic Class, for routing rules that match it)? */
		fib_route(sc, skb, family, src, dst, tos);
		v->to_tun = v->ifindex && v->ifindex == c->tun_ifindex;
		v->ifindex = 0;
		/* A source that is one of the router's own addresses is a
		 * martian the kernel drops (RFC 1812 section 5.3.7;
		 * fib_validate_source): not forwarded, so not translated
		 * either. The source looked up as a destination is then not a
		 * unicast route. Nor is a source with no route at all (the
		 * lookup cannot tell them apart: Linux keeps the local and
		 * main tables in one trie), whose packets the kernel would
		 * still forward: these go to the slow path too (the replies
		 * of such a source could not be routed back anyway). */
		if (v->to_tun && family == AF_INET) {
			struct bpf_fib_lookup *p = &sc->p;
			__u8 none[4] = {};
			fib_params(p, skb, AF_INET, none, src, 0, 1);
			if (fib(skb, p) == BPF_FIB_LKUP_RET_NOT_FWDED)
				v->to_tun = 0;
		}
	}
	if (v->to_tun) {
		int r;
		if (family == AF_INET6) {
			r = map_6to4(c, gen, src, v->xsrc);
			/* RFC 6877 section 6.3: a CLAT's EAMT IPv4 sides are its
			 * LAN; a source from IPv6 that maps into one (the CLAT's
			 * own prefix, or pool6 around a LAN address) is spoofed:
			 * the slow path drops it (src6_unmappable). */
			if (r >= 0 && (c->flags & F_SRC_EAM_ONLY) &&
			    (r == 0 || eam4_has(gen, v->xsrc)))
				r = -P_UNMAPPED;
			if (r >= 0) {
				r = map_6to4(c, gen, dst, v->xdst);
				/* RFC 7757 section 4.2.2: intrinsic hairpinning
				 * (to an EAM'd IPv4 address through pool6) is done
				 * by the slow path. */
				if (r == 1 && (c->flags & F_HAIRPIN_INTRINSIC) &&
				    eam4_has(gen, v->xdst))
					r = -P_HAIRPIN;
			}
		} else {
			r = map_4to6(c, gen, src, v->xsrc, 1);
			if (r >= 0)
				r = map_4to6(c, gen, dst, v->xdst, 0);
		}
		if (r < 0) {
			v->map_reason = -r;
		} else if (!test) {
			/* The translated packet's route, with its TOS (RFC
			 * 7915 section 5.1) or Traffic Class (section 4.1). */
			__u8 otos = family == AF_INET6 ? tos_of(c, tos) : tc_of(c, tos);
			fib_route(sc, skb, family == AF_INET6 ? AF_INET : AF_INET6, v->xsrc,
				  v->xdst, otos);
		}
	}
	bpf_map_update_elem(&xlat_routes, &sc->k, v, BPF_ANY);
	return v;
}

/* route_val's next hop (nh_family, then nh) is laid out as struct
 * bpf_redir_neigh, so send() hands it to bpf_redirect_neigh in place. */
_Static_assert(__builtin_offsetof(struct route_val, nh) ==
		       __builtin_offsetof(struct route_val, nh_family) + 4,
	       "route_val: nh must follow nh_family");
_Static_assert(sizeof(struct bpf_redir_neigh) == 20, "bpf_redir_neigh: 20 bytes");

/* May a translated packet of len bytes take route r? 0 or a pass reason. */
static __always_inline int next_hop(const struct xlat_cfg *c, const struct route_val *r, __u32 len)
{
	if (!r || !r->ifindex)
		return P_NO_ROUTE;
	if (len > r->mtu)
		return P_TOO_BIG;
	if (r->ifindex == c->tun_ifindex)
		return P_HAIRPIN; /* it would come back to the translator */
	return 0;
}

static __always_inline int send(struct __sk_buff *skb, const struct xlat_cfg *c,
				const struct route_val *r, __u32 counter, struct flow_val *fv)
{
	if (fv) {
		/* Last-seen time for the session's expiry (written at most
		 * once per millisecond: the entry is shared by all CPUs). */
		__u64 now = bpf_ktime_get_coarse_ns();
		if (now - fv->seen > 1000000)
			fv->seen = now;
	}
	count(counter);
	/* The translated IP packet's bytes (a GSO packet counts its headers
	 * once), as the TUN datapath counts translated_*_bytes. */
	count_n(counter == C_V6TO4 ? C_V6TO4_BYTES : C_V4TO6_BYTES, skb->len - 14);
	if (c->flags & F_TEST)
		return TC_ACT_REDIRECT;
	if (!r) /* next_hop() refused it already: for the verifier */
		return TC_ACT_SHOT;
	return bpf_redirect_neigh(r->ifindex, (void *)&r->nh_family, sizeof(struct bpf_redir_neigh),
				  0);
}

#define ETH_LEN 14
#define GSO_ANY(skb) ((skb)->gso_segs > 1 || (skb)->gso_size != 0)

/* IANA "IPv6 Extension Header Types" (ESP aside: it is the upper layer
 * for the translator, RFC 7915 section 5.1.1), for the pass counters. */
static __always_inline int ipv6_ext(__u8 nh)
{
	return nh == 0 || nh == 43 || nh == 44 || nh == 51 || nh == 60 || nh == 135 ||
	       nh == 139 || nh == 140 || nh == 253 || nh == 254;
}

/* The checksum difference of the NAT64 port rewrite (4 bytes at the start
 * of the TCP/UDP header), for finish(). */
static __always_inline __s64 ports_diff(const __u8 *old, const __u8 *new)
{
	__u32 o, n;
	__builtin_memcpy(&o, old, 4);
	__builtin_memcpy(&n, new, 4);
	return bpf_csum_diff(&o, 4, &n, 4, 0);
}

/*
 * After bpf_skb_change_proto: the rest of the rewrite, the same in both
 * directions. ICMP: the new 8-byte header (already after the IP header in
 * out). TCP/UDP: the checksum
 * updated for the pseudo-header (RFC 7915 sections 4.5 and 5.5, RFC 1624:
 * bpf_l4_csum_replace with BPF_F_PSEUDO_HDR, a zero UDP result becomes
 * 0xffff) and, for NAT64, for the ports (RFC 6146 section 3.7; not in the
 * pseudo-header, so a CHECKSUM_PARTIAL field is left alone, as by the
 * core), then the ports. Then the new IP header with the L4 bytes that
 * follow it in one store, the ethertype, and the link padding after the
 * packet trimmed. 0, or < 0 on a helper failure.
 */
static __always_inline int finish(struct __sk_buff *skb, __u32 iphlen, int icmp, __u8 proto,
				  __s64 diff, int nat64, __s64 pdiff, const __u8 *np, __u8 *out,
				  __u32 iphsize, __u16 ethertype, __u32 pktlen)
{
	__u32 l4 = ETH_LEN + iphlen;
	__u32 len = iphsize;
	if (icmp) {
		len += 8;
	} else {
		__u32 off = l4 + (proto == IPPROTO_TCP ? 16 : 6);
		__u64 mangled0 = proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
		if (unlikely(bpf_l4_csum_replace(skb, off, 0, diff, BPF_F_PSEUDO_HDR | mangled0) < 0))
			return -1;
		if (nat64) {
			if (unlikely(bpf_l4_csum_replace(skb, off, 0, pdiff, mangled0) < 0))
				return -1;
			__builtin_memcpy(out + iphsize, np, 4);
			len += 4;
		}
	}
	if (unlikely(bpf_skb_store_bytes(skb, ETH_LEN, out, len, 0) < 0))
		return -1;
	__be16 et = bpf_htons(ethertype);
	if (unlikely(bpf_skb_store_bytes(skb, 12, &et, 2, 0) < 0))
		return -1;
	if (unlikely(skb->len > ETH_LEN + pktlen && bpf_skb_change_tail(skb, ETH_LEN + pktlen, 0) < 0))
		return -1;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* IPv6 -> IPv4 (RFC 7915 section 5) */

static __always_inline int do_6to4(struct __sk_buff *skb, const struct xlat_cfg *c, __u32 cw)
{
	struct hdr6 h;
	if (unlikely(load(skb, ETH_LEN, &h, sizeof(h)) < 0))
		return pass(P_MALFORMED);
	if (unlikely((bpf_ntohl(h.vtcfl) >> 28) != 6))
		return pass(P_MALFORMED);
	__u32 plen = bpf_ntohs(h.plen);
	if (unlikely(ETH_LEN + 40 + plen > skb->len))
		return pass(P_MALFORMED);
	/* Extension headers (fragments included) and other protocols: slow
	 * path. (Before the empty-payload check: No Next Header with Payload
	 * Length 0 is a valid packet, and a jumbogram's 0 comes with a
	 * Hop-by-Hop header.) */
	if (unlikely(h.nh != IPPROTO_TCP && h.nh != IPPROTO_UDP && h.nh != IPPROTO_ICMPV6_))
		return pass(ipv6_ext(h.nh) ? P_V6_EXT : P_PROTO);
	if (unlikely(plen == 0))
		return pass(P_MALFORMED);
	int nat64 = XLAT_NAT64;
	__u8 tc = (bpf_ntohl(h.vtcfl) >> 20) & 0xff;
	/* SIIT: the kernel's route and the address mapping, cached.
	 * NAT64: the flow map only holds flows the kernel routes to the TUN. */
	struct route_val *sv = 0;
	if (!nat64) {
		sv = siit_decide(skb, c, cw, AF_INET6, h.src, h.dst, tc);
		if (unlikely(!sv || !sv->to_tun))
			return pass(P_NOT_FOR_XLAT);
	}
	if (unlikely(h.hop <= 1))
		return pass(P_TTL);

	__u8 s4[4] = {}, d4[4] = {};
	if (sv) {
		if (unlikely(sv->map_reason))
			return pass(sv->map_reason);
		__builtin_memcpy(s4, sv->xsrc, 4);
		__builtin_memcpy(d4, sv->xdst, 4);
	}

	__u32 l4 = ETH_LEN + 40;
	__u32 gso = GSO_ANY(skb);
	__u32 l4hdr;
	__u8 l4b[20];
	__u8 proto = h.nh;
	if (proto == IPPROTO_TCP) {
		if (unlikely(plen < 20 || load(skb, l4, l4b, 20) < 0))
			return pass(P_MALFORMED);
		l4hdr = (l4b[12] >> 4) * 4;
		if (unlikely(l4hdr < 20 || l4hdr > plen))
			return pass(P_MALFORMED);
	} else if (proto == IPPROTO_UDP) {
		if (unlikely(plen < 8 || load(skb, l4, l4b, 8) < 0))
			return pass(P_MALFORMED);
		__u32 ulen = ((__u32)l4b[4] << 8) | l4b[5];
		if (unlikely(ulen < 8 || ulen > plen))
			return pass(P_MALFORMED);
		if (unlikely(l4b[6] == 0 && l4b[7] == 0))
			return pass(P_UDP_CSUM0);
		l4hdr = 8;
	} else {
		if (unlikely(plen < 8 || load(skb, l4, l4b, 8) < 0))
			return pass(P_MALFORMED);
		/* RFC 7915 section 5.2: echo only; errors and the rest: slow path */
		if (unlikely(l4b[0] != 128 && l4b[0] != 129))
			return pass(P_ICMP);
		l4hdr = 8;
	}

	/* NAT64 (RFC 6146 sections 3.5.1-3.5.3): a cached TCP (ESTABLISHED), UDP or ICMP echo
	 * request flow; its session exists, the Rust side made the entry. */
	struct flow_val *fv = 0;
	__u8 np[4] = {};
	if (nat64) {
		/* RFC 6146 section 3.5.2.2: these change the session state */
		if (unlikely(proto == IPPROTO_TCP && (l4b[13] & TCP_FIN_SYN_RST)))
			return pass(P_NAT64_TCP);
		if (unlikely(proto == IPPROTO_ICMPV6_ && l4b[0] != 128))
			return pass(P_ICMP);
		fv = flow_lookup(0, proto == IPPROTO_ICMPV6_, proto, l4b, h.src, h.dst, 16);
		if (unlikely(!fv))
			return pass(P_NAT64_NO_FLOW);
		__builtin_memcpy(s4, fv->src, 4);
		__builtin_memcpy(d4, fv->dst, 4);
		/* TCP, UDP: source port <- pool4 port; ICMP: identifier <- pool4 id */
		__builtin_memcpy(np, &fv->sport, 2);
		__builtin_memcpy(np + 2, proto != IPPROTO_ICMPV6_ ? (void *)&fv->dport : (void *)&fv->sport, 2);
	}

	__u32 total = plen + 20;
	if (unlikely(total > 0xffff))
		return pass(P_TOO_BIG);
	__u8 tos = tos_of(c, tc);

	/* The size of each packet on the wire: a GSO packet's segments (or
	 * the whole packet when it is shorter than one segment). */
	__u32 seg_len = gso ? 20 + l4hdr + skb->gso_size : total;
	if (seg_len > total)
		seg_len = total;
	/* The TUN datapath takes IPv6 packets up to the TUN MTU (ipv6_mtu);
	 * the kernel answers bigger ones with Packet Too Big for it, as the
	 * router we stand for. Bigger ones go there too, so that a host sees
	 * the same from both datapaths (each IPv6 packet is 20 bytes more
	 * than its translation). */
	if (unlikely(c->ipv6_mtu && seg_len + 20 > c->ipv6_mtu))
		return pass(P_TOO_BIG);

	if (nat64) {
		sv = route(skb, c, cw, AF_INET, s4, d4, tos, d4);
		if (unlikely(sv && sv->map_reason))
			return pass(sv->map_reason);
	}
	if (!(c->flags & F_TEST)) {
		int r = next_hop(c, sv, seg_len);
		if (unlikely(r))
			return pass(r);
	}

	/* Everything is computed before the packet changes: a failure of
	 * bpf_skb_change_proto (the first write) leaves it to the slow path. */
	__s64 diff = 0, pdiff = 0;
	__u8 nb[8] = {};
	if (proto == IPPROTO_ICMPV6_) {
		/* Type 128/129 -> 8/0 and the ICMPv6 pseudo-header removed
		 * (RFC 7915 section 5.2). */
		__u8 t4 = l4b[0] == 128 ? 8 : 0;
		__u64 pseudo = sum_words(h.src, 16) + sum_words(h.dst, 16) + (plen >> 16) +
			       (plen & 0xffff) + IPPROTO_ICMPV6_;
		__u16 field = ((__u16)l4b[2] << 8) | l4b[3];
		__u64 old_word = ((__u16)l4b[0] << 8) | l4b[1];
		__u64 new_word = ((__u16)t4 << 8) | l4b[1];
		if (nat64) {
			/* RFC 6146 section 3.5.3: the identifier too */
			__u16 oid = ((__u16)l4b[4] << 8) | l4b[5];
			__u16 nid = ((__u16)np[0] << 8) | np[1];
			if (oid != nid) {
				field = icsum_update(field, oid, nid);
				l4b[4] = np[0];
				l4b[5] = np[1];
			}
		}
		/* checksum::update(field, pseudo + old_word, new_word) */
		__u16 old = fold(pseudo + old_word);
		__u64 acc = (__u64)(__u16)~field + (__u16)~old + new_word;
		__u16 nc = ~fold(acc);
		nb[0] = t4;
		nb[1] = l4b[1];
		nb[2] = nc >> 8;
		nb[3] = nc & 0xff;
		nb[4] = l4b[4];
		nb[5] = l4b[5];
		nb[6] = l4b[6];
		nb[7] = l4b[7];
	} else {
		__u32 from[8], to[2];
		__builtin_memcpy(from, h.src, 16);
		__builtin_memcpy(from + 4, h.dst, 16);
		__builtin_memcpy(&to[0], s4, 4);
		__builtin_memcpy(&to[1], d4, 4);
		diff = bpf_csum_diff(from, 32, to, 8, 0);
		if (unlikely(diff < 0))
			return pass(P_UNSUPPORTED);
		if (nat64) {
			pdiff = ports_diff(l4b, np);
			if (unlikely(pdiff < 0))
				return pass(P_UNSUPPORTED);
		}
	}

	/* RFC 7915 section 5.1: the IPv4 header. */
	/* nb is copied in rather than built in place: ob alive across the
	 * checksum code above would not fit the 512-byte stack. */
	struct out4 ob = {};
	__builtin_memcpy(ob.l4, nb, 8);
	struct hdr4 *o = &ob.ip;
	o->vihl = 0x45;
	o->tos = tos;
	o->tot_len = bpf_htons(total);
	if (seg_len <= 1260) {
		/* DF = 0 and a generated Identification (section 5.1); for a GSO
		 * packet by the size of its segments, as they would be translated
		 * one by one (the kernel numbers the segments from this id); the
		 * TUN datapath's rule (the core by the whole packet, then
		 * vnet::gso_v4_segment_df by the segments). */
		o->id = bpf_htons((__u16)bpf_get_prandom_u32());
		o->frag = 0;
	} else {
		o->id = 0;
		o->frag = bpf_htons(0x4000);
	}
	o->ttl = h.hop - 1;
	o->proto = proto == IPPROTO_ICMPV6_ ? IPPROTO_ICMP : proto;
	__builtin_memcpy(o->src, s4, 4);
	__builtin_memcpy(o->dst, d4, 4);
	o->csum = bpf_htons(~fold(sum_words(o, 20)));

	/* Headers (and the GSO type) from here on: no way back. */
	if (unlikely(bpf_skb_change_proto(skb, bpf_htons(ETH_P_IP), 0) < 0))
		return pass(P_UNSUPPORTED);
	if (unlikely(finish(skb, 20, proto == IPPROTO_ICMPV6_, proto, diff, nat64, pdiff, np, (__u8 *)&ob,
		   sizeof(ob.ip), ETH_P_IP, total) < 0))
		goto fail;
	return send(skb, c, sv, C_V6TO4, fv);
fail:
	count(D_ERROR);
	return TC_ACT_SHOT;
}

/* ---------------------------------------------------------------------- */
/* IPv4 -> IPv6 (RFC 7915 section 4) */

static __always_inline int do_4to6(struct __sk_buff *skb, const struct xlat_cfg *c, __u32 cw)
{
	struct hdr4 h;
	if (unlikely(load(skb, ETH_LEN, &h, sizeof(h)) < 0))
		return pass(P_MALFORMED);
	if (unlikely((h.vihl >> 4) != 4 || (h.vihl & 15) < 5))
		return pass(P_MALFORMED);
	__u32 total = bpf_ntohs(h.tot_len);
	__u32 ihl = (h.vihl & 15) * 4;
	if (unlikely(total < ihl || ETH_LEN + total > skb->len))
		return pass(P_MALFORMED);
	if (unlikely(ihl != 20))
		return pass(P_V4_OPTIONS);
	/* RFC 1812 section 5.3.7: a router does not forward a packet from
	 * 0.0.0.0, 127/8, a multicast (224/4) or the limited broadcast
	 * source: the kernel drops these martians before routing (and so
	 * before the TUN), whatever the denylist says; not the fast path's.
	 * (Linux forwards the rest of 0/8 and of 240/4.) */
	__u32 s32;
	__builtin_memcpy(&s32, h.src, 4);
	if (unlikely(s32 == 0 || s32 == 0xffffffff || h.src[0] == 127 || (h.src[0] & 0xf0) == 224))
		return pass(P_NOT_FOR_XLAT);
	__u16 frag = bpf_ntohs(h.frag);
	if (frag & 0x3fff) /* MF or an offset */
		return pass(P_FRAGMENT);
	int nat64 = XLAT_NAT64;
	struct route_val *sv = 0;
	if (!nat64) {
		sv = siit_decide(skb, c, cw, AF_INET, h.src, h.dst, h.tos);
		if (unlikely(!sv || !sv->to_tun))
			return pass(P_NOT_FOR_XLAT);
	}
	/* RFC 1812 section 5.2.2: a bad header checksum is the slow path's
	 * to count and drop. */
	if (unlikely(fold(sum_words(&h, 20)) != 0xffff))
		return pass(P_MALFORMED);
	if (unlikely(h.ttl <= 1))
		return pass(P_TTL);

	__u8 s6[16] = {}, d6[16] = {};
	if (sv) {
		if (unlikely(sv->map_reason))
			return pass(sv->map_reason);
		__builtin_memcpy(s6, sv->xsrc, 16);
		__builtin_memcpy(d6, sv->xdst, 16);
	}

	__u32 l4 = ETH_LEN + 20;
	__u32 plen = total - 20;
	__u32 gso = GSO_ANY(skb);
	__u32 l4hdr;
	__u8 l4b[20];
	__u8 proto = h.proto;
	if (proto == IPPROTO_TCP) {
		if (unlikely(plen < 20 || load(skb, l4, l4b, 20) < 0))
			return pass(P_MALFORMED);
		l4hdr = (l4b[12] >> 4) * 4;
		if (unlikely(l4hdr < 20 || l4hdr > plen))
			return pass(P_MALFORMED);
	} else if (proto == IPPROTO_UDP) {
		if (unlikely(plen < 8 || load(skb, l4, l4b, 8) < 0))
			return pass(P_MALFORMED);
		__u32 ulen = ((__u32)l4b[4] << 8) | l4b[5];
		if (unlikely(ulen < 8 || ulen > plen))
			return pass(P_MALFORMED);
		/* RFC 7915 section 4.5: a zero checksum is the slow path's. */
		if (unlikely(l4b[6] == 0 && l4b[7] == 0))
			return pass(P_UDP_CSUM0);
		l4hdr = 8;
	} else if (proto == IPPROTO_ICMP) {
		if (unlikely(plen < 8 || load(skb, l4, l4b, 8) < 0))
			return pass(P_MALFORMED);
		if (unlikely(l4b[0] != 8 && l4b[0] != 0))
			return pass(P_ICMP);
		l4hdr = 8;
	} else {
		return pass(P_PROTO);
	}

	/* NAT64 (RFC 6146 sections 3.5.1-3.5.3): a cached TCP (ESTABLISHED), UDP or ICMP echo
	 * reply flow to a pool4 transport address. */
	struct flow_val *fv = 0;
	__u8 np[4] = {};
	if (nat64) {
		if (unlikely(proto == IPPROTO_TCP && (l4b[13] & TCP_FIN_SYN_RST)))
			return pass(P_NAT64_TCP);
		if (unlikely(proto == IPPROTO_ICMP && l4b[0] != 0))
			return pass(P_ICMP);
		fv = flow_lookup(1, proto == IPPROTO_ICMP, proto, l4b, h.src, h.dst, 4);
		if (unlikely(!fv))
			return pass(P_NAT64_NO_FLOW);
		__builtin_memcpy(s6, fv->src, 16);
		__builtin_memcpy(d6, fv->dst, 16);
		/* TCP, UDP: destination port <- the client's; ICMP: identifier */
		if (proto != IPPROTO_ICMP) {
			__builtin_memcpy(np, &fv->sport, 2);
			__builtin_memcpy(np + 2, &fv->dport, 2);
		} else {
			__builtin_memcpy(np, &fv->dport, 2);
		}
	}

	__u32 out_len = 40 + plen;
	int df = frag & 0x4000;
	if (!gso) {
		/* RFC 7915 section 4: no DF and too big for lowest-ipv6-mtu,
		 * or for the TUN's own next hop (ipv6_mtu), but never below
		 * 1280: fragmented by the slow path (the core's rule). */
		__u32 mtu = c->lowest_ipv6_mtu;
		if (c->ipv6_mtu && c->ipv6_mtu < mtu)
			mtu = c->ipv6_mtu;
		if (mtu < 1280)
			mtu = 1280;
		if (unlikely(!df && out_len > mtu))
			return pass(P_TOO_BIG);
		/* DF and bigger than the TUN MTU: Fragmentation Needed from the
		 * slow path, as the router we stand for. */
		if (unlikely(df && c->ipv6_mtu && out_len > c->ipv6_mtu))
			return pass(P_TOO_BIG);
	}

	if (nat64) {
		/* With the translated packet's Traffic Class (RFC 7915 section
		 * 4.1), for routing rules that match it. */
		sv = route(skb, c, cw, AF_INET6, s6, d6, tc_of(c, h.tos), h.src);
		if (unlikely(sv && sv->map_reason))
			return pass(sv->map_reason);
	}
	if (!(c->flags & F_TEST)) {
		__u32 check_len = gso ? 40 + l4hdr + skb->gso_size : out_len;
		if (check_len > out_len)
			check_len = out_len;
		int r = next_hop(c, sv, check_len);
		if (unlikely(r))
			return pass(r);
	}

	/* Computed before the packet changes (see do_6to4). */
	__s64 diff = 0, pdiff = 0;
	__u8 nb[8] = {};
	if (proto == IPPROTO_ICMP) {
		/* Echo 8/0 -> 128/129 and the ICMPv6 pseudo-header added
		 * (RFC 7915 section 4.2). */
		__u8 t6 = l4b[0] == 8 ? 128 : 129;
		__u64 pseudo = sum_words(s6, 16) + sum_words(d6, 16) + (plen >> 16) +
			       (plen & 0xffff) + IPPROTO_ICMPV6_;
		__u16 field = ((__u16)l4b[2] << 8) | l4b[3];
		__u64 old_word = ((__u16)l4b[0] << 8) | l4b[1];
		__u64 new_word = ((__u16)t6 << 8) | l4b[1];
		if (nat64) {
			/* RFC 6146 section 3.5.3: the client's identifier */
			__u16 oid = ((__u16)l4b[4] << 8) | l4b[5];
			__u16 nid = ((__u16)np[0] << 8) | np[1];
			if (oid != nid) {
				field = icsum_update(field, oid, nid);
				l4b[4] = np[0];
				l4b[5] = np[1];
			}
		}
		/* checksum::update(field, old_word, new_word + pseudo) */
		__u16 old = fold(old_word);
		__u64 acc = (__u64)(__u16)~field + (__u16)~old + new_word + pseudo;
		__u16 nc = ~fold(acc);
		nb[0] = t6;
		nb[1] = l4b[1];
		nb[2] = nc >> 8;
		nb[3] = nc & 0xff;
		nb[4] = l4b[4];
		nb[5] = l4b[5];
		nb[6] = l4b[6];
		nb[7] = l4b[7];
	} else {
		__u32 from[2], to[8];
		__builtin_memcpy(&from[0], h.src, 4);
		__builtin_memcpy(&from[1], h.dst, 4);
		__builtin_memcpy(to, s6, 16);
		__builtin_memcpy(to + 4, d6, 16);
		diff = bpf_csum_diff(from, 8, to, 32, 0);
		if (unlikely(diff < 0))
			return pass(P_UNSUPPORTED);
		if (nat64) {
			pdiff = ports_diff(l4b, np);
			if (unlikely(pdiff < 0))
				return pass(P_UNSUPPORTED);
		}
	}

	/* RFC 7915 section 4.1: the IPv6 header, flow label 0. */
	struct out6 ob = {}; /* nb copied in: the stack, as in do_6to4 */
	__builtin_memcpy(ob.l4, nb, 8);
	struct hdr6 *o = &ob.ip;
	__u8 tc = tc_of(c, h.tos);
	o->vtcfl = bpf_htonl((6u << 28) | ((__u32)tc << 20));
	o->plen = bpf_htons(plen);
	o->nh = proto == IPPROTO_ICMP ? IPPROTO_ICMPV6_ : proto;
	o->hop = h.ttl - 1;
	__builtin_memcpy(o->src, s6, 16);
	__builtin_memcpy(o->dst, d6, 16);

	/* Headers (and the GSO type) from here on: no way back. */
	if (unlikely(bpf_skb_change_proto(skb, bpf_htons(ETH_P_IPV6), 0) < 0))
		return pass(P_UNSUPPORTED);
	if (unlikely(finish(skb, 40, proto == IPPROTO_ICMP, proto, diff, nat64, pdiff, np, (__u8 *)&ob,
		   sizeof(ob.ip), ETH_P_IPV6, 40 + plen) < 0))
		goto fail;
	return send(skb, c, sv, C_V4TO6, fv);
fail:
	count(D_ERROR);
	return TC_ACT_SHOT;
}

SEC("tc")
int xlat_ingress(struct __sk_buff *skb)
{
	__u32 z = 0;
	__u32 *g = bpf_map_lookup_elem(&xlat_gen, &z);
	if (!g)
		return TC_ACT_UNSPEC;
	/* The configuration word: its low bit selects the active half of the
	 * double-buffered configuration, the rest counts installs. */
	__u32 cw = *g;
	__u32 gen = cw & 1;
	struct xlat_cfg *c = bpf_map_lookup_elem(&xlat_cfg, &gen);
	if (unlikely(!c || !(c->flags & F_ENABLED)))
		return pass(P_DISABLED);
	__u64 *lease = bpf_map_lookup_elem(&xlat_lease, &z);
	/* The coarse clock (CLOCK_MONOTONIC_COARSE, a tick behind at most)
	 * is plenty for a 3 s lease and cheaper than a clocksource read. */
	if (unlikely(!lease || (*lease != ~0ULL && bpf_ktime_get_coarse_ns() > *lease)))
		return pass(P_DISABLED);
	/* A VLAN tag (accelerated) belongs to a VLAN device: not ours. */
	if (unlikely(skb->vlan_present))
		return pass(P_NOT_IP);
	/* A frame to another link-layer address (promiscuous mode, a bridge
	 * port), or to a broadcast / multicast one, is never forwarded by the
	 * kernel (RFC 1812 section 5.3.4; ip_forward / ip6_forward drop
	 * everything but PACKET_HOST): neither by us. */
	if (unlikely(skb->pkt_type != PACKET_HOST_))
		return pass(P_NOT_FOR_XLAT);
	if (skb->protocol == bpf_htons(ETH_P_IPV6))
		return do_6to4(skb, c, cw);
	if (skb->protocol == bpf_htons(ETH_P_IP))
		return do_4to6(skb, c, cw);
	return pass(P_NOT_IP);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
