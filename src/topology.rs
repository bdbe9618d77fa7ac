//! The machine's topology for the core plan, from hwloc (through hwlocality): physical cores,
//! their hardware threads and their NUMA nodes. Read once, before the EAL starts.

use hwlocality::object::types::ObjectType;
use wirelat_control::core_plan::{PhysicalCore, Topology};

/// The machine's physical cores with their CPUs and NUMA node. Machines where hwloc sees no
/// core objects get one core per processing unit.
pub fn machine_topology() -> Result<Topology, String> {
    let topo = hwlocality::Topology::new().map_err(|e| format!("hwloc cannot read the topology: {e}"))?;
    let nodes: Vec<(u32, Vec<u16>)> = topo
        .objects_with_type(ObjectType::NUMANode)
        .map(|n| {
            let node = n.os_index().and_then(|i| u32::try_from(i).ok()).unwrap_or(0);
            (node, n.cpuset().map(|s| cpus_of(s.iter_set())).unwrap_or_default())
        })
        .collect();
    let node_of = |cpu: u16| nodes.iter().find(|(_, cpus)| cpus.contains(&cpu)).map_or(0, |(n, _)| *n);
    let mut cores: Vec<PhysicalCore> = topo
        .objects_with_type(ObjectType::Core)
        .filter_map(|c| c.cpuset().map(|s| cpus_of(s.iter_set())))
        .filter(|cpus| !cpus.is_empty())
        .map(|cpus| PhysicalCore { numa_node: cpus.first().copied().map_or(0, node_of), cpus })
        .collect();
    if cores.is_empty() {
        cores = topo
            .objects_with_type(ObjectType::PU)
            .filter_map(|pu| pu.os_index().and_then(|i| u16::try_from(i).ok()))
            .map(|cpu| PhysicalCore { numa_node: node_of(cpu), cpus: vec![cpu] })
            .collect();
    }
    cores.sort_by_key(|c| c.cpus.first().copied());
    Ok(Topology { cores })
}

fn cpus_of<I: Iterator<Item = T>, T: Into<usize>>(it: I) -> Vec<u16> {
    let mut v: Vec<u16> = it.filter_map(|i| u16::try_from(i.into()).ok()).collect();
    v.sort_unstable();
    v
}
