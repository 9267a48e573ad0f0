output "vpc_id" {
  description = "ID of the VPC."
  value       = aws_vpc.this.id
}

output "vpc_cidr_block" {
  description = "IPv4 CIDR block of the VPC."
  value       = aws_vpc.this.cidr_block
}

output "public_subnet_ids" {
  description = "IDs of the public subnets, one per availability zone."
  value       = aws_subnet.public[*].id
}

output "private_subnet_ids" {
  description = "IDs of the private subnets, one per availability zone."
  value       = aws_subnet.private[*].id
}

output "availability_zones" {
  description = "Availability zones the subnets are in."
  value       = local.azs
}

output "nat_public_cidrs" {
  description = "The NAT gateways' public addresses as /32 CIDR blocks: what the private subnets' traffic to public endpoints comes from."
  value       = [for eip in aws_eip.nat : "${eip.public_ip}/32"]
}
