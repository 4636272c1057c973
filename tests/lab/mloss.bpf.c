// tests/lab: drop IPv4 multicast with a given probability, in the kernel.
// A tc direct-action classifier; lab.sh compiles it once per loss rate with
// -DLOSS_Q24=<loss x 2^24> and attaches it to a link's ingress. Everything
// that is not IPv4 to 224.0.0.0/4 passes untouched (TCP, unicast, ARP).
// A packet kept is handed on (TC_ACT_UNSPEC): to the link's next filter if
// it has one (the server's rate cap, lab.sh), else up the stack.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

#ifndef LOSS_Q24
#define LOSS_Q24 0
#endif

static unsigned int (*prandom)(void) = (void *)BPF_FUNC_get_prandom_u32;

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
    if ((prandom() >> 8) < (unsigned int)LOSS_Q24)
        return TC_ACT_SHOT;
    return TC_ACT_UNSPEC;
}

char _license[] __attribute__((section("license"), used)) = "GPL";
