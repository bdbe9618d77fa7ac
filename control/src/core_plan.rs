//! Where the threads run: the main lcore (control thread) and one worker per queue, placed on
//! the machine's topology before the EAL starts.
//!
//! Rules, in order of priority:
//! 1. `[eal] main_core` and `[workers] cores` override the plan (each on its own).
//! 2. Workers go on physical cores of the NIC's NUMA node first (a virtual device has no node:
//!    any node will do), one worker per physical core, on its first hardware thread: no two
//!    workers are SMT siblings.
//! 3. The control thread goes on a physical core no worker uses, where possible: the first
//!    core of the machine (where the OS's housekeeping usually runs), kept free of workers while
//!    enough other cores exist.
//! 4. When there are not enough physical cores, the plan degrades and says so in its notes:
//!    workers share the control thread's core, then take SMT siblings of other workers.
//!
//! Pure: the topology comes from the caller (hwlocality in the binary), so the rules are tested
//! here without hwloc or DPDK.

use thiserror::Error;

use crate::config::Config;

/// One physical core: its NUMA node and its hardware threads (OS CPU numbers), first = primary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhysicalCore {
    /// NUMA node (0 when the machine has one node or hwloc does not know).
    pub numa_node: u32,
    /// OS indices of its hardware threads, ascending.
    pub cpus: Vec<u16>,
}

/// The usable CPUs of the machine, grouped by physical core, in OS order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// Physical cores with at least one usable CPU.
    pub cores: Vec<PhysicalCore>,
}

impl Topology {
    /// A flat topology of `cpus` single-threaded cores on node 0 (when hwloc is unavailable).
    pub fn flat(cpus: u16) -> Self {
        Self { cores: (0..cpus).map(|c| PhysicalCore { numa_node: 0, cpus: vec![c] }).collect() }
    }
}

/// The placement of the run's threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorePlan {
    /// CPU of the main lcore (control thread).
    pub main: u16,
    /// CPU of worker i.
    pub workers: Vec<u16>,
    /// Why the plan looks the way it does (logged at start).
    pub notes: Vec<String>,
}

/// A plan that cannot be made.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PlanError {
    /// The topology has no CPU.
    #[error("the machine topology lists no usable CPU")]
    NoCpu,
    /// More workers than CPUs.
    #[error("{workers} workers need {workers} CPUs but only {cpus} are usable")]
    TooFewCpus {
        /// Requested workers.
        workers: usize,
        /// Usable CPUs.
        cpus: usize,
    },
}

impl CorePlan {
    /// The plan when `[eal] main_core` and `[workers] cores` are both given (no topology needed).
    pub fn from_overrides(config: &Config) -> Option<CorePlan> {
        let main = config.eal.main_core?;
        let workers = config.workers.cores.as_ref()?.get_ref().clone();
        Some(CorePlan {
            main,
            workers,
            notes: vec!["main core and worker cores set in the configuration".into()],
        })
    }

    /// Plans `workers` workers on `topo` for a NIC on `nic_node` (None: virtual device or
    /// unknown), honouring the configuration's overrides.
    pub fn plan(
        topo: &Topology,
        nic_node: Option<u32>,
        workers: usize,
        main_override: Option<u16>,
        workers_override: Option<&[u16]>,
    ) -> Result<CorePlan, PlanError> {
        let mut notes = Vec::new();
        let cpus: usize = topo.cores.iter().map(|c| c.cpus.len()).sum();
        if cpus == 0 {
            return Err(PlanError::NoCpu);
        }
        // Physical cores, NIC node first, then by first CPU.
        let mut order: Vec<&PhysicalCore> = topo.cores.iter().filter(|c| !c.cpus.is_empty()).collect();
        order.sort_by_key(|c| (nic_node.is_some_and(|n| c.numa_node != n), c.cpus.first().copied()));
        let core_of = |cpu: u16| topo.cores.iter().position(|c| c.cpus.contains(&cpu));

        let main = match main_override {
            Some(m) => {
                notes.push(format!("main core {m} set in the configuration"));
                m
            }
            None => {
                // The machine's first core: housekeeping runs there anyway.
                let first = topo.cores.iter().filter_map(|c| c.cpus.first().copied()).min().unwrap_or(0);
                notes.push(format!("control thread on CPU {first} (the machine's first core)"));
                first
            }
        };
        let main_core = core_of(main);

        if let Some(w) = workers_override {
            notes.push(format!("worker cores {w:?} set in the configuration"));
            return Ok(CorePlan { main, workers: w.to_vec(), notes });
        }
        if workers > cpus {
            return Err(PlanError::TooFewCpus { workers, cpus });
        }
        let mut chosen: Vec<u16> = Vec::with_capacity(workers);
        // Pass 1: primary threads of cores other than the control thread's.
        for c in &order {
            if chosen.len() == workers {
                break;
            }
            let idx = topo.cores.iter().position(|x| std::ptr::eq(x, *c));
            if idx == main_core {
                continue;
            }
            if let Some(&cpu) = c.cpus.first() {
                chosen.push(cpu);
            }
        }
        // Pass 2: the control thread's core (another thread of it if it has one).
        if chosen.len() < workers
            && let Some(mc) = main_core.and_then(|i| topo.cores.get(i))
        {
            let cpu = mc.cpus.iter().copied().find(|&c| c != main).unwrap_or(main);
            notes.push(format!(
                "not enough physical cores: a worker shares the control thread's core (CPU {cpu})"
            ));
            chosen.push(cpu);
        }
        // Pass 3: SMT siblings of workers' cores.
        if chosen.len() < workers {
            notes.push("not enough physical cores: workers share physical cores as SMT siblings".into());
            for c in &order {
                for &cpu in c.cpus.iter().skip(1) {
                    if chosen.len() < workers && !chosen.contains(&cpu) && cpu != main {
                        chosen.push(cpu);
                    }
                }
            }
        }
        // Pass 4: anything left, the control thread's CPU included.
        for c in &order {
            for &cpu in &c.cpus {
                if chosen.len() < workers && !chosen.contains(&cpu) {
                    chosen.push(cpu);
                }
            }
        }
        if let Some(n) = nic_node {
            let off: Vec<u16> = chosen
                .iter()
                .copied()
                .filter(|&cpu| core_of(cpu).and_then(|i| topo.cores.get(i)).is_some_and(|c| c.numa_node != n))
                .collect();
            if off.is_empty() {
                notes.push(format!("workers on the NIC's NUMA node {n}"));
            } else {
                notes
                    .push(format!("CPUs {off:?} are not on the NIC's NUMA node {n}: not enough cores there"));
            }
        } else {
            notes.push("no NIC NUMA node (virtual device or unknown): any node".into());
        }
        Ok(CorePlan { main, workers: chosen, notes })
    }
}

/// The NUMA node of a PCI device from sysfs (`/sys/bus/pci/devices/<addr>/numa_node`); `None`
/// for a device without one (-1), a virtual device or an unreadable file.
pub fn pci_numa_node(pci_address: &str) -> Option<u32> {
    let path = format!("/sys/bus/pci/devices/{pci_address}/numa_node");
    std::fs::read_to_string(path).ok()?.trim().parse::<i64>().ok().and_then(|n| u32::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn smt(nodes: &[(u32, &[u16])]) -> Topology {
        Topology {
            cores: nodes
                .iter()
                .map(|(n, cpus)| PhysicalCore { numa_node: *n, cpus: cpus.to_vec() })
                .collect(),
        }
    }

    #[test]
    fn two_vcpus_put_control_on_0_and_the_worker_on_1() {
        let p = CorePlan::plan(&Topology::flat(2), None, 1, None, None).unwrap();
        assert_eq!((p.main, p.workers.clone()), (0, vec![1]));
        // Two workers on two CPUs: one shares the control thread's core, and the plan says so.
        let p = CorePlan::plan(&Topology::flat(2), None, 2, None, None).unwrap();
        assert_eq!((p.main, p.workers.clone()), (0, vec![1, 0]));
        assert!(p.notes.iter().any(|n| n.contains("shares the control thread's core")), "{:?}", p.notes);
        assert_eq!(
            CorePlan::plan(&Topology::flat(2), None, 3, None, None),
            Err(PlanError::TooFewCpus { workers: 3, cpus: 2 })
        );
    }

    #[test]
    fn workers_prefer_the_nic_node_and_never_share_a_physical_core() {
        // Node 0: cores {0,8} {1,9}; node 1: cores {2,10} {3,11} {4,12}.
        let t = smt(&[(0, &[0, 8]), (0, &[1, 9]), (1, &[2, 10]), (1, &[3, 11]), (1, &[4, 12])]);
        let p = CorePlan::plan(&t, Some(1), 3, None, None).unwrap();
        assert_eq!(p.main, 0);
        assert_eq!(p.workers, vec![2, 3, 4]);
        assert!(p.notes.iter().any(|n| n.contains("NIC's NUMA node 1")));
        // Four workers: node 1 is full, the fourth goes to node 0 (not CPU 0's core), noted.
        let p = CorePlan::plan(&t, Some(1), 4, None, None).unwrap();
        assert_eq!(p.workers, vec![2, 3, 4, 1]);
        assert!(p.notes.iter().any(|n| n.contains("not on the NIC's NUMA node")));
        // Six workers on five physical cores: the control core's sibling, then SMT siblings.
        let p = CorePlan::plan(&t, Some(1), 6, None, None).unwrap();
        assert_eq!(p.workers, vec![2, 3, 4, 1, 8, 10]);
        let mut sorted = p.workers.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 6, "no CPU twice");
    }

    #[test]
    fn overrides_win() {
        let t = Topology::flat(8);
        let p = CorePlan::plan(&t, None, 2, Some(5), Some(&[6, 7])).unwrap();
        assert_eq!((p.main, p.workers), (5, vec![6, 7]));
        let p = CorePlan::plan(&t, None, 2, Some(3), None).unwrap();
        assert_eq!(p.main, 3);
        assert_eq!(p.workers, vec![0, 1], "the control thread's core is avoided");
        assert_eq!(CorePlan::plan(&Topology::default(), None, 1, None, None), Err(PlanError::NoCpu));
        assert_eq!(pci_numa_node("0000:zz:00.0"), None);
    }
}
