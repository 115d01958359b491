package schema

// NamespaceKey names a namespace: a deployment's tenant.
//
//mk:identity min=1 max=64
type NamespaceKey string

// RepoName names a repository inside a namespace.
//
//mk:identity min=1 max=128
type RepoName string

// ShardRef names the ref a ref shard serves ("refs/heads/main").
//
//mk:identity min=1 max=256
type ShardRef string

// Partition identifies one partition of the reference service: a subspace
// of the keyspace with its own timers, outbox and rows.
//
//mk:union partition
type Partition struct {
	Ref          *RefPartition          `mk:"tag=1,kind=ref"`
	Namespace    *NamespacePartition    `mk:"tag=2,kind=namespace"`
	Coordinator  *CoordinatorPartition  `mk:"tag=3,kind=coordinator"`
	RepoIndex    *RepoIndexPartition    `mk:"tag=4,kind=repo_index"`
	RefIndex     *RefIndexPartition     `mk:"tag=5,kind=ref_index"`
	ContentShard *ContentShardPartition `mk:"tag=6,kind=content"`
}

// RefPartition holds one ref of one repository: its reservations and the
// relay rows they queue.
type RefPartition struct {
	NS       NamespaceKey
	Repo     RepoName
	ShardRef ShardRef
}

// NamespacePartition holds namespace-wide state.
type NamespacePartition struct {
	NS NamespaceKey
}

// CoordinatorPartition holds a namespace's lease table (leased shards,
// lease recovery and reconciliation markers).
type CoordinatorPartition struct {
	NS NamespaceKey
}

// RepoIndexPartition indexes one repository.
type RepoIndexPartition struct {
	NS   NamespaceKey
	Repo RepoName
}

// RefIndexPartition indexes one ref of one repository.
type RefIndexPartition struct {
	NS       NamespaceKey
	Repo     RepoName
	ShardRef ShardRef
}

// ContentShardPartition holds one shard of a namespace's content-addressed
// store; content ids map to shards by their leading bits.
type ContentShardPartition struct {
	NS    NamespaceKey
	Shard uint32
}
