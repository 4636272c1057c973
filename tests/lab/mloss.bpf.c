// tests/lab: drop IPv4 multicast in the kernel, independently or in bursts.
// A tc direct-action classifier; lab.sh compiles it once per link with
//   -DLOSS_Q24=<p x 2^24>                     each packet lost with p, or
//   -DGB_Q24=<p_gb x 2^24> -DBG_Q24=<p_bg x 2^24>
// for two-state Gilbert-Elliott loss as the simulator's `bursty` model
// (crates/repocast-core/src/loss.rs): per multicast packet the link goes
// Good to Bad with p_gb and back with p_bg, then Bad loses the packet and
// Good keeps it. The state lives in a one-entry array map, one per attached
// copy (per link). Everything that is not IPv4 to 224.0.0.0/4 passes
// untouched (TCP, unicast, ARP) and moves no state.
// A packet kept is handed on (TC_ACT_UNSPEC): to the link's next filter if
// it has one (the server's rate cap, lab.sh), else up the stack.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

#ifndef LOSS_Q24
#define LOSS_Q24 0
#endif

static unsigned int (*prandom)(void) = (void *)BPF_FUNC_get_prandom_u32;

#ifdef GB_Q24
static void *(*map_lookup)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;

// A BTF-defined map (libbpf's `__uint`/`__type` spelled out, so no
// libbpf headers are needed): the link's state, 1 = Bad.
struct {
    int (*type)[BPF_MAP_TYPE_ARRAY];
    int (*max_entries)[1];
    unsigned int *key;
    unsigned int *value;
} ge_state __attribute__((section(".maps"), used));
#endif

__attribute__((section("classifier"), used))
int mloss(struct __sk_buff *skb)
{
    unsigned char *p = (unsigned char *)(long)skb->data;
    unsigned char *end = (unsigned char *)(long)skb->data_end;
    /* Ethernet (14 bytes), then the IPv4 destination at offset 16 of the
     * IP header: bytes 12-13 are the EtherType, byte 30 the first byte of
     * the destination address. */
    if (p + 34 > end)
        return TC_ACT_UNSPEC;
    if (p[12] != 0x08 || p[13] != 0x00)
        return TC_ACT_UNSPEC;
    if ((p[30] & 0xF0) != 0xE0)
        return TC_ACT_UNSPEC;
#ifdef GB_Q24
    unsigned int key = 0;
    unsigned int *bad = map_lookup(&ge_state, &key);
    if (!bad)
        return TC_ACT_UNSPEC;
    unsigned int flip = *bad ? (unsigned int)BG_Q24 : (unsigned int)GB_Q24;
    unsigned int now = *bad;
    if ((prandom() >> 8) < flip)
        now = !now;
    /* Packets of one link may be handled on both cores at once: a lost
     * update only shortens or lengthens one burst by a packet. */
    *bad = now;
    return now ? TC_ACT_SHOT : TC_ACT_UNSPEC;
#else
    if ((prandom() >> 8) < (unsigned int)LOSS_Q24)
        return TC_ACT_SHOT;
    return TC_ACT_UNSPEC;
#endif
}

char _license[] __attribute__((section("license"), used)) = "GPL";
