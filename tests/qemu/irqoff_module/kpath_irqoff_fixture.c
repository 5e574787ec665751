// SPDX-License-Identifier: GPL-2.0
/*
 * kpath_irqoff_fixture - a test fixture of kpathd's QEMU kernel matrix, not part of kpathd.
 *
 * A stand-in for seed 004's driver: it holds a spinlock of its own with IRQs off for a chosen
 * time, so that kpathd's IRQ-off detector has a real region to measure and a real culprit to
 * name on kernels that lack the BPF kfuncs bpf_local_irq_save/restore (before Linux 6.14).
 *
 *   echo 80000 > /proc/kpath_irqoff_fixture   # hold IRQs off for 80000 us on this CPU
 *   cat /proc/kpath_irqoff_fixture            # "regions <n>\nlast_region_ns <ns>\n"
 *
 * A write of a number of microseconds (1 to 1000000) takes kpath_fixture_lock with
 * spin_lock_irqsave(), busy-waits on ktime_get_ns() (not udelay(): its calibration means
 * little under an emulated CPU) inside kpath_fixture_hold_irqs_off(), a noinline function with
 * a name of its own, and releases the lock with spin_unlock_irqrestore(). The timer interrupt
 * that fell due meanwhile is then taken at the instruction that re-enables IRQs, on a stack
 * that reads _raw_spin_unlock_irqrestore <- kpath_fixture_hold_irqs_off <- ... Anything else
 * written fails with EINVAL (EIO if the clock did not move with IRQs off). A read reports the
 * regions made so far and the length of the last one as measured here.
 */
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/kstrtox.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>

#define KPATH_FIXTURE_NAME "kpath_irqoff_fixture"
#define KPATH_FIXTURE_MAX_US (1000 * 1000)
/* Longest input accepted: "1000000\n" and a little slack. */
#define KPATH_FIXTURE_MAX_INPUT 16
/* The clock must move: stop a region early if it does not after this many reads. */
#define KPATH_FIXTURE_STUCK_READS (1000 * 1000)

/*
 * A driver's spinlock_t, as in seed 004. On PREEMPT_RT a spinlock_t sleeps and leaves IRQs on,
 * and a driver that really needs them off takes a raw spinlock: so does this one there (the same
 * _raw_spin_lock_irqsave/_raw_spin_unlock_irqrestore underneath as spin_lock_irqsave elsewhere).
 */
#ifdef CONFIG_PREEMPT_RT
static DEFINE_RAW_SPINLOCK(kpath_fixture_lock);
#define kpath_fixture_lock_irqsave(flags) raw_spin_lock_irqsave(&kpath_fixture_lock, flags)
#define kpath_fixture_unlock_irqrestore(flags) \
	raw_spin_unlock_irqrestore(&kpath_fixture_lock, flags)
#else
static DEFINE_SPINLOCK(kpath_fixture_lock);
#define kpath_fixture_lock_irqsave(flags) spin_lock_irqsave(&kpath_fixture_lock, flags)
#define kpath_fixture_unlock_irqrestore(flags) \
	spin_unlock_irqrestore(&kpath_fixture_lock, flags)
#endif
/* Protected by kpath_fixture_lock. */
static u64 kpath_fixture_regions;
static u64 kpath_fixture_last_ns;
static struct proc_dir_entry *kpath_fixture_entry;

/*
 * The culprit kpathd must name: noinline, and __noclone so that kallsyms lists it under this
 * very name (no .isra.0 or .constprop.0 clone). The length is returned, and used, after the
 * unlock, so that this frame is on the stack when spin_unlock_irqrestore() re-enables IRQs (no
 * tail call).
 */
static noinline __noclone u64 kpath_fixture_hold_irqs_off(u64 hold_ns)
{
	unsigned long flags;
	unsigned long reads = 0;
	u64 start, now;

	kpath_fixture_lock_irqsave(flags);
	start = ktime_get_ns();
	do {
		cpu_relax();
		now = ktime_get_ns();
		if (unlikely(now == start && ++reads > KPATH_FIXTURE_STUCK_READS))
			break;
	} while (now - start < hold_ns);
	kpath_fixture_regions++;
	kpath_fixture_last_ns = now - start;
	kpath_fixture_unlock_irqrestore(flags);
	return now - start;
}

static ssize_t kpath_fixture_write(struct file *file, const char __user *buf,
				   size_t count, loff_t *ppos)
{
	unsigned int us;
	int err;

	if (count == 0 || count > KPATH_FIXTURE_MAX_INPUT)
		return -EINVAL;
	err = kstrtouint_from_user(buf, count, 10, &us);
	if (err)
		return err;
	if (us == 0 || us > KPATH_FIXTURE_MAX_US)
		return -EINVAL;
	/* A region cut short means a clock that does not move with IRQs off. */
	if (kpath_fixture_hold_irqs_off((u64)us * NSEC_PER_USEC) < (u64)us * NSEC_PER_USEC)
		return -EIO;
	return count;
}

static int kpath_fixture_show(struct seq_file *m, void *v)
{
	unsigned long flags;
	u64 regions, last_ns;

	kpath_fixture_lock_irqsave(flags);
	regions = kpath_fixture_regions;
	last_ns = kpath_fixture_last_ns;
	kpath_fixture_unlock_irqrestore(flags);
	seq_printf(m, "regions %llu\nlast_region_ns %llu\n", regions, last_ns);
	return 0;
}

static int kpath_fixture_open(struct inode *inode, struct file *file)
{
	return single_open(file, kpath_fixture_show, NULL);
}

static const struct proc_ops kpath_fixture_ops = {
	.proc_open = kpath_fixture_open,
	.proc_read = seq_read,
	.proc_lseek = seq_lseek,
	.proc_release = single_release,
	.proc_write = kpath_fixture_write,
};

static int __init kpath_fixture_init(void)
{
	kpath_fixture_entry = proc_create(KPATH_FIXTURE_NAME, 0600, NULL,
					  &kpath_fixture_ops);
	if (!kpath_fixture_entry)
		return -ENOMEM;
	pr_info(KPATH_FIXTURE_NAME ": /proc/" KPATH_FIXTURE_NAME
		" holds IRQs off for the microseconds written to it\n");
	return 0;
}

static void __exit kpath_fixture_exit(void)
{
	proc_remove(kpath_fixture_entry);
}

module_init(kpath_fixture_init);
module_exit(kpath_fixture_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("kpathd tests");
MODULE_DESCRIPTION("Test fixture: holds a spinlock with IRQs off for a chosen time");
